class FlashBackend:
    def attend(self):
        return "flash"


class TritonBackend:
    def attend(self):
        return "triton"


class TorchBackend:
    def attend(self):
        return "torch"
