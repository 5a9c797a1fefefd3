from app.workers import BaseWorker


class Runner:
    @property
    def worker(self) -> BaseWorker:
        return self._worker
