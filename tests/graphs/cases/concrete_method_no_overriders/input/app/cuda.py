from app.base import Backend


class CudaBackend(Backend):
    def execute(self):
        return "cuda"
