"""The SGLang names the code inside SGLang's processes looks up by name, and where each lives.

The payload (:mod:`sgtrace.payload`) cannot import the map: it gets these names through its
JSON config (:class:`~sgtrace.payload.config.SglangNames`, written by
:func:`sgtrace.hooks.render.hook_config`) and holds no SGLang name of its own
(``tests/payload/test_no_sglang_names.py`` walks it). Each :class:`RuntimeName` also says where
it lives (a :class:`Home`) and from which release on, so that ``tests/sglang/test_map_releases.py``
checks every one of them on every release, and a field's alternatives (:func:`alternatives`:
the decision carrier's receiver, which moved at 0.5.13, and the DP attention switch, which
moved out of ``ServerArgs``' class body at 0.5.20) on every release. The plain off state's
own names are :mod:`sgtrace.sglang.plain_names`.

>>> runtime_names().receive_requests
'recv_requests'
>>> sorted({n.home.kind.value for n in RUNTIME_NAMES})
['attribute', 'binding', 'field', 'method', 'module']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from sgtrace.payload.config import SglangNames
from sgtrace.sglang.anchors import SCHEDULER_MODULE, WORKER_CLASS, WORKER_MODULE


class HomeKind(Enum):
    """What kind of definition a runtime name is, in its :class:`Home`."""

    MODULE = "module"  # the name is a module
    BINDING = "binding"  # a name bound at the top level of the module
    METHOD = "method"  # a method of the class
    ATTRIBUTE = "attribute"  # ``self.<name> = ...`` somewhere in the class
    FIELD = "field"  # assigned or annotated in the class body (a dataclass or struct field)
    PARAMETER = "parameter"  # a parameter of the function ``cls`` names (``Class.method``)


@dataclass(frozen=True)
class Home:
    """Where a runtime name is defined: in one of ``modules`` (the first that exists and
    defines it), in ``cls`` for methods and attributes (for a parameter, ``cls`` is the
    function's qualified name)."""

    kind: HomeKind
    modules: tuple[str, ...]
    cls: str | None = None


@dataclass(frozen=True)
class RuntimeName:
    """One name of :class:`~sgtrace.payload.config.SglangNames`: its field, its value, where it
    lives, the first release that must define it (None: every release the map knows), and the
    last where upstream dropped it.

    A field may have several entries, its alternatives, newest first, where upstream moved the
    thing named (the scheduler's request receiving moved into a component at 0.5.13). A release's
    name for such a field is the first alternative it defines
    (:func:`sgtrace.sglang.release_names.runtime_names_in`); each alternative's range is the
    releases it is the name on (None: from the first release the map knows), checked on every
    release, and ``until`` is where the next alternative takes over, not where the name is gone
    (the scheduler module stays)."""

    field: str
    name: str
    home: Home
    since: str | None = None
    until: str | None = None  # the last release that defines it, where upstream removed it


_WORKER_SELF = Home(HomeKind.ATTRIBUTE, (WORKER_MODULE,), WORKER_CLASS)
# ServerArgs' fields: in its class body until 0.5.19; from 0.5.20 ServerArgs is assembled from
# one class per config namespace (``arg_groups/fields/``), and the record stays flat
_SERVER_ARGS = Home(HomeKind.FIELD, ("sglang.srt.server_args",), "ServerArgs")
_PARALLEL_ARGS = Home(HomeKind.FIELD, ("sglang.srt.arg_groups.fields.parallel",), "Parallel")
_SCHEDULER_GLOBAL = Home(HomeKind.BINDING, (SCHEDULER_MODULE,))
_SCHEDULER_MODULE = Home(HomeKind.MODULE, (SCHEDULER_MODULE,))
# The scheduler receives each iteration's requests and, at TP size over 1, broadcasts the list
# from the first TP rank with a module global of the receiving module (carry.py): in the
# request receiver component from 0.5.13, in the scheduler itself before.
_RECEIVER = "sglang.srt.managers.scheduler_components.request_receiver"

RUNTIME_NAMES: tuple[RuntimeName, ...] = (
    # upstream's own controller (--speculative-adaptive, 0.5.12+): where it is set, the hook only
    # observes (looked up with a default: a worker without the attribute has no controller)
    RuntimeName("controller_slot", "adaptive_controller", _WORKER_SELF, since="0.5.12"),
    # DP attention (each DP rank schedules its own batch, SGLang syncs their forward modes):
    # where it is on, the hook only observes. Read from the worker's server args with defaults
    # (the record's own values: from 0.5.20 those the operator gave, resolution declares apart).
    # From 0.5.22 ``--enable-dp-attention`` is the deprecated spelling of ``--attn-dp-size N``,
    # an input field; at 0.5.20-0.5.21 ``attn_dp_size`` is a value derived into the config bag
    # (the record may lack it: the default, one, and the switch above decide there)
    RuntimeName("server_args_slot", "server_args", _WORKER_SELF),
    RuntimeName("dp_attention_flag", "enable_dp_attention", _PARALLEL_ARGS, since="0.5.20"),
    RuntimeName("dp_attention_flag", "enable_dp_attention", _SERVER_ARGS, until="0.5.19"),
    RuntimeName("dp_attention_size", "attn_dp_size", _PARALLEL_ARGS, since="0.5.20"),
    # the TP size (above one, the decisions are carried from the first TP rank: carry.py)
    RuntimeName("tp_size_field", "tp_size", _PARALLEL_ARGS, since="0.5.20"),
    RuntimeName("tp_size_field", "tp_size", _SERVER_ARGS, until="0.5.19"),
    RuntimeName(
        "batch_algorithm",
        "spec_algorithm",
        Home(HomeKind.ATTRIBUTE, ("sglang.srt.managers.schedule_batch",), "ScheduleBatch"),
    ),
    # alternatives, newest first: the first a release defines is its name (release_names.py);
    # before 0.5.13 the scheduler receives its requests itself
    RuntimeName("receiver_module", _RECEIVER, Home(HomeKind.MODULE, (_RECEIVER,)), "0.5.13"),
    RuntimeName("receiver_module", SCHEDULER_MODULE, _SCHEDULER_MODULE, until="0.5.12"),
    RuntimeName(
        "receiver_class", "SchedulerRequestReceiver", Home(HomeKind.BINDING, (_RECEIVER,)), "0.5.13"
    ),
    RuntimeName("receiver_class", "Scheduler", _SCHEDULER_GLOBAL, until="0.5.12"),
    RuntimeName(
        "receive_requests",
        "recv_requests",
        Home(HomeKind.METHOD, (_RECEIVER,), "SchedulerRequestReceiver"),
        "0.5.13",
    ),
    RuntimeName(
        "receive_requests",
        "recv_requests",
        Home(HomeKind.METHOD, (SCHEDULER_MODULE,), "Scheduler"),
        until="0.5.12",
    ),
    RuntimeName(
        "broadcast_requests", "broadcast_pyobj", Home(HomeKind.BINDING, (_RECEIVER,)), "0.5.13"
    ),
    RuntimeName("broadcast_requests", "broadcast_pyobj", _SCHEDULER_GLOBAL, until="0.5.12"),
)


def runtime_names() -> SglangNames:
    """The names the payload is given by default: each field's first alternative, the newest
    releases' (the request receiver component's for the carrier). A hook gets its release's own
    (:func:`sgtrace.sglang.release_names.runtime_names_in`); tests and benchmarks use these."""
    return SglangNames(**first_names(RUNTIME_NAMES))


def first_names(
    entries: Iterable[RuntimeName], accept: Callable[[RuntimeName], bool] = lambda entry: True
) -> dict[str, str]:
    """Each field's name: that of the first of its entries ``accept`` takes (by default the
    first; a release's own with ``sgtrace.sglang.defined.defines``)."""
    chosen: dict[str, str] = {}
    for entry in entries:
        if entry.field not in chosen and accept(entry):
            chosen[entry.field] = entry.name
    return chosen


def alternatives() -> dict[str, tuple[RuntimeName, ...]]:
    """The fields the map gives several names, each with its entries in order (newest first).

    >>> [(e.home.modules[0], e.name, e.until) for e in alternatives()["receiver_class"]]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('sglang.srt.managers.scheduler_components.request_receiver', 'SchedulerRequestReceiver',
      None), ('sglang.srt.managers.scheduler', 'Scheduler', '0.5.12')]
    """
    by_field: dict[str, tuple[RuntimeName, ...]] = {}
    for entry in RUNTIME_NAMES:
        by_field[entry.field] = (*by_field.get(entry.field, ()), entry)
    return {field: entries for field, entries in by_field.items() if len(entries) > 1}
