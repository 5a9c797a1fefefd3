class Handlers:
    def on_start(self):
        return 1

    def on_stop(self):
        return 2


def handle(handlers: Handlers, event: str):
    return getattr(handlers, "on_" + event)()
