from app.workers import BaseWorker


class Runner:
    worker: BaseWorker

    def step(self):
        self.worker.run()
