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


class OffKernel(Enum):
    """The attention of the zero-step state's one-token verify (see :mod:`.fastverify`)."""

    DECODE = "decode"  # the decode kernel, where the backend is triton-family (default)
    UPSTREAM = "upstream"  # as upstream builds it: the extend kernel


class OffState(Enum):
    """What "off" runs (see docs/hook-mechanism.md)."""

    ZERO_STEP = "zero-step"  # upstream's zero-step runtime state (0.5.14+), see :mod:`.controller`
    PLAIN = "plain"  # the scheduler's plain decode path, see :mod:`.plainoff`


class OffStep(Enum):
    """The host work of a step in the zero-step state (see :mod:`.offstep`)."""

    LEAN = "lean"  # the parts a one-token greedy verify needs, checked against upstream's
    UPSTREAM = "upstream"  # upstream's speculative pipeline as it is


@dataclass(frozen=True)
class HookOptions:
    """The hook's behaviour switches; the defaults are what was measured best.

    ``off_state``: what off runs; ``off_kernel``: the zero-step state's verify attention;
    ``off_step``: its host work;
    ``log_measurements``: log each completed measurement of the measured policy at INFO
    (several a second) instead of DEBUG.
    """

    off_kernel: OffKernel = OffKernel.DECODE
    off_step: OffStep = OffStep.LEAN
    log_measurements: bool = False
    off_state: OffState = OffState.ZERO_STEP

    def to_dict(self) -> dict[str, object]:
        return {
            "off_kernel": self.off_kernel.value,
            "off_step": self.off_step.value,
            "log_measurements": self.log_measurements,
            "off_state": self.off_state.value,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HookOptions:
        return cls(
            OffKernel(data["off_kernel"]),
            OffStep(data["off_step"]),
            bool(data["log_measurements"]),
            OffState(data["off_state"]),
        )


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
    """The SGLang names the payload looks up, patches or calls by name, given by the map.

    Produced by ``sgtrace.sglang.runtime_names`` (which also says where each one lives and on
    which releases) and written into the payload's JSON config; the payload holds none of them
    itself. Fields, in groups: the worker and its model runner; the verify step's module
    globals and worker methods the lean off step replaces; the scheduler's future map; where
    upstream keeps its sampling switches; the attention backend's decode API; where the
    scheduler receives and broadcasts requests (:mod:`.carry`).
    """

    controller_slot: str  # the worker's adaptive controller attribute
    target_worker: str  # the worker's target (model) worker attribute
    get_attention_backend: str  # the model runner's backend factory
    build_state: str  # the worker builds a runtime state
    apply_state: str  # the worker applies a runtime state
    worker_forward: str  # the worker's forward: its module's globals
    worker_verify: str  # the worker's verify: its module's globals
    run_verify: str  # the verify body, whose module's globals hold the next names
    sample: str
    fill_bonus: str
    commit_mamba: str
    mamba_config_check: str
    verify_input_class: str
    capture_mode_class: str
    hidden_state_spec: str
    trivial_input: str
    stub_draft_extend: str
    resolve_inputs: str  # the scheduler module's global that resolves a batch's inputs
    future_map_class: str
    future_map_resolve: str
    future_map_stash: str
    spec_utils_module: str
    simulate_acc_len: str
    async_probe_module: str
    async_probe_envs: str
    sanitize_nan_logits: str
    backend_init_metadata: str
    backend_init_metadata_out_graph: str
    backend_forward_extend: str
    backend_forward_decode: str
    backend_decode_kernel: str
    backend_draft_tokens: str
    backend_verify_buffers: str
    runner_slot: str  # a worker's model runner attribute
    backend_slot: str  # a model runner's attention backend attribute
    batch_algorithm: str  # a batch's speculative algorithm attribute
    future_map_algorithm: str  # the future map's algorithm attribute
    future_map_lazy_flag: str  # the future map has sized its draft buffers (until 0.5.18)
    future_map_topk_flag: str  # the future map relays EAGLE top-k drafts
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

    @property
    def backend_decode_api(self) -> tuple[str, str, str, str]:
        """The attention backend methods a one-token verify is run through as a decode."""
        return (
            self.backend_init_metadata,
            self.backend_init_metadata_out_graph,
            self.backend_forward_extend,
            self.backend_forward_decode,
        )


def _names_from(cls: Any, data: Mapping[str, Any]) -> dict[str, str]:
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
    """Everything the hook reads at install: the release facts, the sites, the switches.

    ``scheduler_module`` is the module of the decide site's caller (the scheduler's, whose
    ``run_batch`` resolves each batch's inputs through the future map), or None.
    """

    source: str
    can_switch: bool
    family_reason: str
    decide: SiteRef
    attach: SiteRef
    unsupported_reason: SiteRef | None
    scheduler_module: str | None
    delivery: Delivery
    policy: PolicyConfig
    options: HookOptions
    names: SglangNames
    plain_names: PlainOffNames | None = None  # None: no plain off state on this release

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HookConfig:
        """The config of a decoded ``sgtrace_hook.json``; :class:`HookConfigError` if malformed."""
        try:
            check = data["unsupported_reason"]
            return cls(
                source=str(data["source"]),
                can_switch=bool(data["can_switch"]),
                family_reason=str(data["family_reason"]),
                decide=SiteRef.from_dict(data["patch"]["decide"]),
                attach=SiteRef.from_dict(data["patch"]["attach"]),
                unsupported_reason=None if check is None else SiteRef.from_dict(check),
                scheduler_module=decide_caller_module(data["sites"]),
                delivery=Delivery(data["delivery"]),
                policy=PolicyConfig.from_dict(data["policy"]),
                options=HookOptions.from_dict(data["options"]),
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


def _plain_names_of(data: Mapping[str, Any]) -> PlainOffNames | None:
    found = data.get(PLAIN_NAMES_KEY)
    return None if found is None else PlainOffNames.from_dict(found)


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


def decide_caller_module(sites: Any) -> str | None:
    """The module of the decide site's caller in ``HookSpec.runtime_config()["sites"]``."""
    for site in sites:
        if site.get("kind") == "decide" and site.get("caller"):
            return str(site["caller"]).partition(":")[0]
    return None
