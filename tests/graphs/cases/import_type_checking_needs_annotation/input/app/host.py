from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.worker import Worker


def drive(worker):
    worker.step()
