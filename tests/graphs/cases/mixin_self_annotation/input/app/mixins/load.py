from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.host import Host


class LoadMixin:
    def load(self: Host) -> None:
        self.save()
        self.report()
