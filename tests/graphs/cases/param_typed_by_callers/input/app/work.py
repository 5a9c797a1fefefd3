class Worker:
    def run(self):
        return 1


class Batch:
    def run(self):
        return 4


class Fast:
    def go(self):
        return 2


class Slow:
    def go(self):
        return 3


def helper(w):
    w.run()


def pump(engine, *, times=1):
    engine.go()


class Runner:
    def start(self, job):
        job.run()


def main():
    helper(Worker())
    worker = Worker()
    Runner().start(worker)
    Runner.start(Runner(), Batch())
    pump(Fast())
    pump(engine=Slow(), times=2)
