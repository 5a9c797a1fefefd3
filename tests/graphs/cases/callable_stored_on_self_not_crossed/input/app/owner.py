def alpha():
    return 1


def beta():
    return 2


def gamma():
    return 3


class Owner:
    def __init__(self, callback, cleanup=None):
        self.callback = callback
        self.cleanup = cleanup

    def fire(self):
        self.callback()

    def close(self):
        self.cleanup()


class Other:
    def __init__(self, callback):
        self.callback = callback

    def fire(self):
        self.callback()


def main():
    Owner(alpha).fire()
    Other(beta).fire()
    gamma()


class Holder:
    def __init__(self, callback):
        self.callback = callback


class Stranger(Holder):
    def __init__(self):
        super().__init__(gamma)
