import abc


class Backend(abc.ABC):
    def step(self):
        self.prepare()
        return self.execute()

    @abc.abstractmethod
    def execute(self):
        """Run one step."""

    def prepare(self):
        raise NotImplementedError
