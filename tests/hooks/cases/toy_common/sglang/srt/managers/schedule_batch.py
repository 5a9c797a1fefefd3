"""A decode or extend batch of a toy scheduler (test input shaped like SGLang 0.5.14+)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class ForwardMode(enum.Enum):
    EXTEND = "extend"
    DECODE = "decode"

    def is_decode(self) -> bool:
        return self is ForwardMode.DECODE

    def is_extend(self) -> bool:
        return self is ForwardMode.EXTEND


class SpecAlgorithm(enum.Enum):
    NONE = "none"
    EAGLE3 = "eagle3"

    def is_none(self) -> bool:
        return self is SpecAlgorithm.NONE


@dataclass
class Req:
    rid: int
    prompt: list[int]
    output_ids: list[int] = field(default_factory=list)


@dataclass
class ScheduleBatch:
    reqs: list[Req]
    forward_mode: ForwardMode
    spec_algorithm: SpecAlgorithm = SpecAlgorithm.EAGLE3
    is_extend_in_batch: bool = False
    forward_iter: int | None = None  # set by the scheduler at launch (0.5.14+ shape)
