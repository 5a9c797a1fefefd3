class BaseWorker:
    def run(self):
        raise NotImplementedError


class FastWorker(BaseWorker):
    def run(self):
        return "fast"


class SlowWorker(BaseWorker):
    def run(self):
        return "slow"


class Model:
    def forward(self):
        return 0
