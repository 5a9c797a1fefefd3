from app.runners import FORMATS, RUNNERS


class Worker:
    def __init__(self, device):
        self.runner = RUNNERS[device](self)

    def step(self, fmt):
        self.runner.replay()
        return FORMATS[fmt](1)
