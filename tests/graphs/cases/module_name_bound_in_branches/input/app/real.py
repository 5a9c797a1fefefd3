class OverlapMixin:
    def drain(self):
        return 1


class Tool:
    def __init__(self):
        self.kind = "real"
