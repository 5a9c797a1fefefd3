"""Helpers of the payload tests: a hook config for fakes, in the payload's own types."""

from __future__ import annotations

import sys
import types

import pytest

from sgtrace.payload.config import DEFAULT_OPTIONS, Delivery, HookConfig, HookOptions, SiteRef
from sgtrace.payload.policy import PolicyConfig

UPSTREAM_CHECK = SiteRef("fake_adaptive_spec_params", "adaptive_unsupported_reason")


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
    )
