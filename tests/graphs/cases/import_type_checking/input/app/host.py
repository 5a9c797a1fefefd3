from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.worker import Worker


def drive(worker: Worker) -> None:
    worker.step()


def drive_quoted(worker: "Worker") -> None:
    worker.step()
