"""The speculative algorithms (a toy of upstream's ``SpeculativeAlgorithm``)."""

from __future__ import annotations

import enum


class SpeculativeAlgorithm(enum.Enum):
    NONE = "none"
    EAGLE3 = "eagle3"

    def is_none(self) -> bool:
        return self is SpeculativeAlgorithm.NONE
