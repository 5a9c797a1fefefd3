import json


class Worker:
    def run(self):
        return 1


class Plain:
    def run(self):
        return 2


def helper(w):
    w.run()


def never_called(w):
    w.run()


def from_outside(w):
    w.run()


class Tool:
    def helper(self, w):
        w.run()

    @staticmethod
    def unbound(w):
        w.run()


def main():
    helper(Worker())
    Tool().helper(Plain())
    from_outside(json.loads("{}"))
