class Scorer:
    def __init__(self):
        self.total = 0

    def __call__(self, value):
        self.total += value


class Plain:
    def __init__(self):
        self.total = 0
