"""Helpers of the payload tests: a hook config for fakes, in the payload's own types."""

from __future__ import annotations

from pathlib import Path

from tests.payload import plain_fakes

from sgtrace.payload.config import (
    DEFAULT_OPTIONS,
    Delivery,
    HookConfig,
    HookOptions,
    PlainOffNames,
    SglangNames,
    SiteRef,
)
from sgtrace.payload.policy import PolicyConfig
from sgtrace.sglang.release_names import runtime_names_in
from sgtrace.sglang.runtime_names import runtime_names

NAMES = runtime_names()  # the names a hook is given (the newest releases' receiver)
DECIDE = SiteRef(plain_fakes.__name__, "Scheduler.decode_result")
ATTACH = SiteRef(plain_fakes.__name__, "Worker.__init__")

# The scheduler of 0.5.9-0.5.12 as the map reads it: it receives each iteration's requests
# itself and broadcasts them with its module global (no request receiver component yet).
SCHEDULER_0_5_9 = """from sglang.srt.utils import broadcast_pyobj

class Scheduler:
    def recv_requests(self):
        recv_reqs = self.recv_from_tokenizer()
        if self.tp_size != 1:
            recv_reqs = broadcast_pyobj(
                recv_reqs, self.tp_group.rank, self.tp_cpu_group, src=self.tp_group.ranks[0]
            )
        return recv_reqs
"""


def names_before_the_receiver(root: Path) -> SglangNames:
    """What the map gives a hook on a release whose scheduler receives its requests itself
    (0.5.9-0.5.12): the names read from :data:`SCHEDULER_0_5_9`, written under ``root``."""
    path = root / "sglang/srt/managers/scheduler.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SCHEDULER_0_5_9, "utf-8")
    return runtime_names_in(root)


def hook_config(
    policy: PolicyConfig,
    delivery: Delivery = Delivery.PATCH,
    options: HookOptions = DEFAULT_OPTIONS,
    names: SglangNames = NAMES,
    plain_names: PlainOffNames = plain_fakes.NAMES,
) -> HookConfig:
    """The config of a hook on the stand-ins of :mod:`tests.payload.plain_fakes` (by default
    delivered by a patch: the scheduler's methods there are wrapped at attach)."""
    return HookConfig("toy", DECIDE, ATTACH, delivery, policy, options, names, plain_names)
