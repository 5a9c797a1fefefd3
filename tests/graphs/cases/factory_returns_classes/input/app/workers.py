class EagleWorker:
    def __init__(self, config):
        self.config = config

    def generate(self):
        return "eagle"


class NgramWorker:
    def __init__(self, config):
        self.config = config

    def generate(self):
        return "ngram"


class StandaloneWorker:
    def generate(self):
        return "standalone"
