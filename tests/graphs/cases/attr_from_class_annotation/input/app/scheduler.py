from app.queue import Queue


class Scheduler:
    waiting: Queue

    def submit(self, item):
        self.waiting.push(item)
