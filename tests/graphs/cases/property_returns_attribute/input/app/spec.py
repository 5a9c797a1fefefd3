from app.base import Runner
from app.workers import FastWorker, Model


class SpecRunner(Runner):
    def __init__(self):
        self._worker = FastWorker()
        self._model = Model()

    @property
    def model(self):
        return self._model

    def step(self):
        self.model.forward()
        self.worker.run()
