class BaseWorker:
    def run(self):
        return "base"


class FastWorker(BaseWorker):
    def run(self):
        return "fast"


class SlowWorker(BaseWorker):
    def run(self):
        return "slow"
