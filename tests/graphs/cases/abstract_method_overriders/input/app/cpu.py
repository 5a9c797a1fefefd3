from app.base import Backend


class CpuBackend(Backend):
    def execute(self):
        return "cpu"


class PinnedCpuBackend(CpuBackend):
    def execute(self):
        return "pinned"
