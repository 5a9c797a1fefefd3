from app.backends import FlashBackend, TritonBackend


class Layer:
    def __init__(self, fast: bool):
        if fast:
            self.backend = FlashBackend()
        else:
            self.backend = TritonBackend()

    def forward(self):
        self.backend.attend()
