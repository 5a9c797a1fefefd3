from typing import Dict, List, Tuple

from app.model import Req, Worker


class Batch:
    reqs: List[Req]
    workers: Dict[str, Worker]

    def finish_all(self):
        for req in self.reqs:
            req.finish()

    def run_all(self):
        for name, worker in self.workers.items():
            worker.run(name)
        return [w.run(None) for w in self.workers.values()]

    def numbered(self):
        for index, req in enumerate(self.reqs):
            req.finish()

    def paired(self, pair: Tuple[Req, Worker]):
        req, worker = pair
        worker.run(req)
        for r, w in zip(self.reqs, self.workers.values()):
            w.run(r)
