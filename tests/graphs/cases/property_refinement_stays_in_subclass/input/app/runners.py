from app.workers import BaseWorker, FastWorker, SlowWorker


class Runner:
    @property
    def worker(self) -> BaseWorker:
        return self._worker

    def step(self):
        self.worker.run()


class FastRunner(Runner):
    def __init__(self):
        self._worker = FastWorker()

    def go(self):
        self.worker.run()


class SlowRunner(Runner):
    def __init__(self):
        self._worker = SlowWorker()
