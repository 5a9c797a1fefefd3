"""Helpers of the payload tests: a hook config for fakes, in the payload's own types."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from sgtrace.payload.config import (
    DEFAULT_OPTIONS,
    Delivery,
    HookConfig,
    HookOptions,
    SglangNames,
    SiteRef,
)
from sgtrace.payload.policy import PolicyConfig
from sgtrace.sglang.family import Family
from sgtrace.sglang.release_names import runtime_names_in
from sgtrace.sglang.runtime_names import runtime_names

NAMES = runtime_names(Family.ZERO_STEP_STATES)  # what a hook on a switching release is given
UPSTREAM_CHECK = SiteRef("fake_adaptive_spec_params", "adaptive_unsupported_reason")

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


def switching_config(
    monkeypatch: pytest.MonkeyPatch, policy: PolicyConfig, options: HookOptions = DEFAULT_OPTIONS
) -> HookConfig:
    """The config of a hook delivered by a patch (nothing is imported or wrapped) on a release
    that can switch; upstream's check of the server arguments (a fake module) allows it."""
    check = types.ModuleType(UPSTREAM_CHECK.module)
    check.adaptive_unsupported_reason = lambda server_args: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, UPSTREAM_CHECK.module, check)
    site = SiteRef("fake_scheduler_never_imported", "Processor.decode")
    return HookConfig(
        source="toy",
        can_switch=True,
        family_reason="zero-step states",
        decide=site,
        attach=site,
        unsupported_reason=UPSTREAM_CHECK,
        scheduler_module=None,
        delivery=Delivery.PATCH,
        policy=policy,
        options=options,
        names=NAMES,
    )
