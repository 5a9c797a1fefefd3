"""The hook's configuration: ``sgtrace_hook.json``, written by ``sgtrace inject-hook``.

The file lies beside the ``sgtrace_payload`` package: in the bootstrap directory
(``--mode runtime``) or in SGLang's top package (``--mode patch``). The sites and release facts
come from ``HookSpec.runtime_config()``; :class:`HookOptions` holds the hook's behaviour switches
(each a flag of ``inject-hook`` and ``launch``); ``policy`` the policy's settings.

>>> HookOptions.from_dict(HookOptions().to_dict()) == HookOptions()
True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from enum import Enum
from typing import Any

from .policy import PolicyConfig

CONFIG_NAME = "sgtrace_hook.json"


class HookConfigError(ValueError):
    """``sgtrace_hook.json`` is missing, unreadable or not what this payload expects."""


class Delivery(Enum):
    """How the hook reaches SGLang's processes."""

    RUNTIME = "runtime"  # a bootstrap directory on PYTHONPATH; the import hook patches SGLang
    PATCH = "patch"  # SGLang's source calls the hook


OFF_STATE_KEY = "off_state"  # in the options: what off runs, for readers of the config
PLAIN_OFF = "plain"  # the scheduler's plain decode path (:mod:`.plainoff`), the only off state


@dataclass(frozen=True)
class HookOptions:
    """The hook's behaviour switches; the defaults are what was measured best.

    ``log_measurements``: log at INFO instead of DEBUG each completed measurement of the
    measured policy (several a second), and where the calibrated policy ends a probe or
    switches, what it compared there (:mod:`.explain`).

    ``catch_up``: switching on, the tokens each request decoded while off are prefilled again
    in the speculative mode (one extend of the target and the draft over them), so the draft's
    KV covers them; without it those positions keep no draft KV (a cold start). Off by default:
    what the cold start costs a trained draft, and so whether the extend pays, is not measured.

    Off is always the scheduler's plain decode path (:mod:`.plainoff`); the options record it as
    ``off_state`` for readers of the config (``sgtrace validate`` picks its off rules by it).
    A config written by an older sgtrace whose off state was upstream's zero-step state (gone
    from this hook) is refused with what to do.

    >>> HookOptions().to_dict()
    {'log_measurements': False, 'catch_up': False, 'off_state': 'plain'}
    """

    log_measurements: bool = False
    catch_up: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "log_measurements": self.log_measurements,
            "catch_up": self.catch_up,
            OFF_STATE_KEY: PLAIN_OFF,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HookOptions:
        state = data.get(OFF_STATE_KEY, "zero-step")  # older hooks wrote none: zero-step
        if state != PLAIN_OFF:
            raise HookConfigError(
                f"its off state is {state!r}, which this hook no longer has (off is SGLang's "
                "plain decode path): written by an older sgtrace; regenerate the hook directory "
                "(sgtrace inject-hook)"
            )
        return cls(bool(data["log_measurements"]), bool(data.get("catch_up", False)))


DEFAULT_OPTIONS = HookOptions()


@dataclass(frozen=True)
class SiteRef:
    """A function the hook patches or calls: ``module`` and ``qualname`` in it."""

    module: str
    qualname: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SiteRef:
        return cls(str(data["module"]), str(data["qualname"]))


@dataclass(frozen=True)
class SglangNames:
    """The SGLang names the hook looks up beyond the plain off state's, given by the map.

    Produced by ``sgtrace.sglang.runtime_names`` (which also says where each one lives and on
    which releases) and written into the payload's JSON config; the payload holds none of them
    itself. Fields: where upstream keeps its own adaptive controller and where the server args
    say DP attention is on (the hook then only observes, :mod:`.eligibility`), a batch's
    algorithm, and where the scheduler receives and broadcasts requests (:mod:`.carry`).
    """

    controller_slot: str  # the worker's adaptive controller attribute (--speculative-adaptive)
    server_args_slot: str  # the worker's server args attribute
    dp_attention_flag: str  # their DP attention switch (--enable-dp-attention)
    dp_attention_size: str  # their attention DP width (--attn-dp-size, 0.5.22+)
    tp_size_field: str  # their TP size
    batch_algorithm: str  # a batch's speculative algorithm attribute
    receiver_module: str  # the module whose class receives each iteration's requests
    receiver_class: str
    receive_requests: str  # its method, called once per scheduler loop iteration
    broadcast_requests: str  # the module global that broadcasts them from the first TP rank

    def to_dict(self) -> dict[str, str]:
        return {key: str(value) for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SglangNames:
        """The names of a decoded config; KeyError or TypeError where one is missing or odd."""
        return cls(**_names_from(cls, data))


def _names_from(cls: Any, data: Mapping[str, Any]) -> dict[str, str]:
    missing = [field.name for field in fields(cls) if field.name not in data]
    if missing:  # a map name added since the config was written
        raise HookConfigError(
            f"it lacks the SGLang names {', '.join(missing)}: written by an older sgtrace; "
            "regenerate the hook directory (sgtrace inject-hook)"
        )
    values: dict[str, str] = {}
    for field in fields(cls):
        value = data[field.name]
        if not isinstance(value, str) or not value:
            raise TypeError(f"SGLang name {field.name!r} is {value!r}, not a name")
        values[field.name] = value
    return values


@dataclass(frozen=True)
class PlainOffNames:
    """The SGLang names the plain off state (:mod:`.plainoff`) uses, given by the map."""

    switch_module: str  # the scheduler's module
    switch_qualname: str  # the scheduler method a switch runs before (prefill scheduling)
    result_qualname: str  # the scheduler method that processes a batch's results
    abort_qualname: str  # the scheduler method that aborts requests; shown the held ones
    output_module: str
    output_qualname: str  # streams outputs; shown the launched algorithm while off
    running_batch_name: str  # that method's running-batch argument, or the scheduler's attribute
    release_module: str
    release_kv: str  # gives a request's KV back (into the radix cache)
    release_insert_kw: str
    tree_cache_attr: str
    reset_retract: str
    retracted_flag: str
    filter_method: str
    batch_full_flag: str  # cleared once the running batch is emptied, as SGLang's retraction does
    add_to_queue: str
    retracted_kw: str
    waiting_queue_name: str  # the scheduler's waiting queue (a list), where an abort looks
    scheduler_algorithm: str
    worker_slot: str
    target_slot: str
    future_map_slot: str
    future_map_module: str
    future_map_class: str  # built again with algorithm NONE for the plain decode path
    runner_slot: str
    runner_algorithm: str
    backend_slot: str
    new_attn_backend: str
    capture_decode: str
    none_member: str

    def to_dict(self) -> dict[str, str]:
        return {key: str(value) for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlainOffNames:
        return cls(**_names_from(cls, data))


NAMES_KEY = "sglang_names"
PLAIN_NAMES_KEY = "plain_off_names"


@dataclass(frozen=True)
class HookConfig:
    """Everything the hook reads at install: the release, the sites, the names, the switches.

    ``plain_names``: the plain off state's names in this release (:mod:`.plainoff`), which
    ``sgtrace inject-hook`` requires of every release it writes a hook for.
    """

    source: str
    decide: SiteRef
    attach: SiteRef
    delivery: Delivery
    policy: PolicyConfig
    options: HookOptions
    names: SglangNames
    plain_names: PlainOffNames

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HookConfig:
        """The config of a decoded ``sgtrace_hook.json``; :class:`HookConfigError` if malformed."""
        try:
            return cls(
                source=str(data["source"]),
                decide=SiteRef.from_dict(data["patch"]["decide"]),
                attach=SiteRef.from_dict(data["patch"]["attach"]),
                delivery=Delivery(data["delivery"]),
                policy=PolicyConfig.from_dict(data["policy"]),
                options=HookOptions.from_dict(data.get("options", {})),  # none: an older hook
                names=_names_of(data),  # a config complete but for them says so
                plain_names=_plain_names_of(data),
            )
        except HookConfigError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise HookConfigError(f"not a config of this sgtrace hook ({exc!r})") from exc


def _names_of(data: Mapping[str, Any]) -> SglangNames:
    if NAMES_KEY not in data:
        raise HookConfigError(
            f"it has no {NAMES_KEY!r} (the SGLang names the hook looks up): written by an "
            "older sgtrace; regenerate the hook directory (sgtrace inject-hook)"
        )
    return SglangNames.from_dict(data[NAMES_KEY])


def _plain_names_of(data: Mapping[str, Any]) -> PlainOffNames:
    found = data.get(PLAIN_NAMES_KEY)
    if found is None:
        raise HookConfigError(
            f"it has no {PLAIN_NAMES_KEY!r} (the SGLang names of the plain off state): written "
            "by an older sgtrace; regenerate the hook directory (sgtrace inject-hook)"
        )
    return PlainOffNames.from_dict(found)


def read_config(path: str) -> HookConfig:
    """The config in the JSON file ``path``; :class:`HookConfigError` for any problem."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise HookConfigError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise HookConfigError(f"{path} holds no JSON object")
    try:
        return HookConfig.from_dict(data)
    except HookConfigError as exc:
        raise HookConfigError(f"{path}: {exc}") from exc


def config_path() -> str:
    """Where the config lies: beside this package (its parent directory)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), CONFIG_NAME)
