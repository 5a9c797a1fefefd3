from app.workers import BaseWorker, FastWorker


class Runner:
    worker: BaseWorker

    def __init__(self):
        self.worker = FastWorker()

    def step(self):
        self.worker.run()
