def log_done():
    return "done"


class Owner:
    def __init__(self, on_done):
        self.on_done = on_done

    def fire(self):
        self.on_done()


class Service:
    def finish(self):
        return True

    def start(self):
        Owner(on_done=self.finish).fire()


def main():
    Owner(log_done).fire()


class Timer(Owner):
    def __init__(self):
        super().__init__(self.tick)

    def tick(self):
        return 0
