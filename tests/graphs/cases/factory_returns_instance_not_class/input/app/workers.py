class EagleWorker:
    def __init__(self):
        self.steps = 0

    def __call__(self):
        return self.steps

    def generate(self):
        return "eagle"


def make_worker():
    return EagleWorker()
