from abc import ABC, abstractmethod


class BaseWorker(ABC):
    @abstractmethod
    def run(self):
        ...


class FastWorker(BaseWorker):
    def run(self):
        return "fast"


class SlowWorker(BaseWorker):
    def run(self):
        return "slow"
