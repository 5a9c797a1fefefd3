from app.left import Left
from app.right import Right


class Leaf(Left, Right):
    def run(self):
        self.step()
        self.hello()

    def describe(self):
        return super().describe()

    @classmethod
    def build(cls):
        return cls.create()
