class CudaRunner:
    def __init__(self, worker):
        self.worker = worker

    def replay(self):
        return 1


class CpuRunner:
    def __init__(self, worker):
        self.worker = worker

    def replay(self):
        return 2


class Unrelated:
    def replay(self):
        return 3


def to_json(x):
    return x


def to_text(x):
    return x


RUNNERS = {"cuda": CudaRunner, "cpu": CpuRunner}
FORMATS = {"json": to_json, "text": to_text}
