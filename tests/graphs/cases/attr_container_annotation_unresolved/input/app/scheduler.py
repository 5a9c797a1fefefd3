from typing import Dict, List

from app.queue import Queue


class Scheduler:
    queues: List[Queue]
    by_name: Dict[str, Queue]

    def submit(self, item):
        self.queues.push(item)
        self.by_name.push(item)
