class Base:
    def step(self):
        return "base"

    def describe(self):
        return "base"

    @classmethod
    def create(cls):
        return cls()
