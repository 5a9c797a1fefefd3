class Server:
    @classmethod
    def launch(cls, host) -> "Server":
        return cls()

    def push(self):
        return 1


class Relay:
    @classmethod
    def launch(cls, host) -> "Relay":
        return cls()

    def push(self):
        return 2
