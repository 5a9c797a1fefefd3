"""Which functions the tracer records, and which facts it reads from each call.

A :class:`Selection` is a list of :class:`Probe`: a function (``module:Qual.name``), its
:class:`Role`, and declarative :class:`FactSpec` extractors. Extractors are data, not code, so
they travel in the plugin's JSON config and stay cheap and defensive inside SGLang's processes:
each names where to look (a local variable or argument, ``return``), an attribute path, and a
:class:`Transform`. The first candidate that yields a value wins; a missing attribute yields
nothing, never an error. Extractors are keyed by role and list the argument spellings of every
supported release (``batch`` in 0.5.16, ``model_worker_batch`` in 0.5.9), so one table serves
all of them.

>>> selection = default_selection({Role.VERIFY: [QualName.parse("pkg.spec:Worker.verify")]})
>>> [(str(p.function), p.role.value) for p in selection.probes]
[('pkg.spec:Worker.verify', 'verify')]
>>> [spec.fact.value for spec in selection.probes[0].facts]
['batch_size', 'draft_width', 'num_steps']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from sgtrace.names import QualName
from sgtrace.sglang.trace_paths import TRACE_PATHS, Path
from sgtrace.tracer.events import Fact, Role

RETURN = "return"  # the source name of a function's return value
# where the hook hands each DecisionRecord over (the payload is copied as ``sgtrace_payload``),
# and the name of that argument
HOOK_DECISION = QualName("sgtrace_payload.record", "DecisionLog.record")
DECISION_ARGUMENT = "decision"


class Transform(Enum):
    """How a found object becomes a JSON fact. Never forces a device sync: tensors on a GPU
    yield nothing (``cpu_list``), and ``int``/``float`` accept Python or NumPy numbers only."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    STR = "str"
    NAME = "name"  # an Enum member's name (ForwardMode.DECODE -> "DECODE"), or a str
    LEN = "len"
    CPU_LIST = "cpu_list"  # list of numbers from a list or a CPU tensor


class Moment(Enum):
    """When a fact is read: on entry (arguments as passed) or on exit (results, updated state)."""

    ENTRY = "entry"
    EXIT = "exit"


@dataclass(frozen=True)
class FactSpec:
    """Read ``fact`` from the first of ``candidates`` that yields a value.

    A candidate is a path: its first element names a local (``self``, an argument) or
    ``return``; the rest are attributes, or indexes written as digits (``shape``, ``0``).
    """

    fact: Fact
    candidates: tuple[tuple[str, ...], ...]
    transform: Transform
    at: Moment = Moment.ENTRY

    def to_json(self) -> dict[str, object]:
        return {
            "fact": self.fact.value,
            "from": [list(path) for path in self.candidates],
            "as": self.transform.value,
            "at": self.at.value,
        }


@dataclass(frozen=True, order=True)
class Probe:
    """One selected function, its role, and the facts read from each call."""

    function: QualName
    role: Role = field(compare=False)
    facts: tuple[FactSpec, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, object]:
        return {
            "name": str(self.function),
            "role": self.role.value,
            "facts": [spec.to_json() for spec in self.facts],
        }


STEP_PATHS: tuple[Path, ...] = TRACE_PATHS.step_paths
RANK_PATHS: tuple[Path, ...] = TRACE_PATHS.rank_paths


@dataclass(frozen=True)
class Selection:
    """The probes, and where the process's step and rank are read.

    ``step_paths``/``rank_paths`` are tried on the ``self`` of selected calls: the first object
    with an integer ``forward_ct`` (SGLang's ``Scheduler``) gives every later event its step;
    the first integer ``tp_rank`` (``Scheduler.tp_rank`` in 0.5.9, ``Scheduler.ps.tp_rank``
    in 0.5.16) gives the process's rank.
    """

    probes: tuple[Probe, ...]
    step_paths: tuple[tuple[str, ...], ...] = STEP_PATHS
    rank_paths: tuple[tuple[str, ...], ...] = RANK_PATHS

    @property
    def functions(self) -> tuple[QualName, ...]:
        return tuple(probe.function for probe in self.probes)

    def to_json(self) -> dict[str, object]:
        return {
            "probes": [probe.to_json() for probe in self.probes],
            "step_paths": [list(path) for path in self.step_paths],
            "rank_paths": [list(path) for path in self.rank_paths],
        }


def _spec(fact: Fact, transform: Transform, *paths: Path, at: Moment = Moment.ENTRY) -> FactSpec:
    return FactSpec(fact, paths, transform, at)


_P = TRACE_PATHS  # every SGLang spelling below comes from the map
SELF = "self"  # the object of a method call


def _of_batches(path: Path, *more: str) -> tuple[Path, ...]:
    """``path`` of the batch argument in each of its spellings (and of ``more`` arguments)."""
    return tuple((argument, *path) for argument in (*_P.batch_arguments, *more))


def _of(argument: str, *paths: Path) -> tuple[Path, ...]:
    return tuple((argument, *path) for path in paths)


_BATCH = _P.schedule_batch_argument
_BATCH_SIZE = _spec(Fact.BATCH_SIZE, Transform.INT, *_of_batches(_P.batch_size))
_FORWARD_MODE = _spec(Fact.FORWARD_MODE, Transform.NAME, *_of_batches(_P.forward_mode))
_FORWARD_ITER = _spec(Fact.STEP, Transform.INT, *_of_batches(_P.forward_iter))
_SELF_STEPS = _spec(Fact.NUM_STEPS, Transform.INT, *_of(SELF, _P.num_steps))

ROLE_FACTS: Mapping[Role, tuple[FactSpec, ...]] = {
    Role.STEP: (
        _spec(Fact.BATCH_SIZE, Transform.LEN, *_of(_BATCH, _P.requests)),
        _spec(Fact.FORWARD_MODE, Transform.NAME, *_of(_BATCH, _P.forward_mode)),
    ),
    Role.DECODE_RESULT: (
        _spec(Fact.BATCH_SIZE, Transform.LEN, *_of(_BATCH, _P.requests)),
        _spec(Fact.STEP, Transform.INT, *_of(_BATCH, _P.forward_iter)),
        _spec(
            Fact.ACCEPT_LENGTHS,
            Transform.CPU_LIST,
            *_of(_P.result_argument, _P.accept_lengths),
            at=Moment.EXIT,
        ),
        _spec(
            Fact.ACCEPTED_DRAFTS,
            Transform.INT,
            *_of(_P.result_argument, *_P.accepted_drafts),
            at=Moment.EXIT,
        ),
    ),
    Role.SPEC_FORWARD: (
        _BATCH_SIZE,
        _FORWARD_MODE,
        _FORWARD_ITER,
        _spec(Fact.NUM_STEPS, Transform.INT, *_of(SELF, _P.num_steps), at=Moment.EXIT),
        _spec(Fact.DRAFT_WIDTH, Transform.INT, *_of(SELF, _P.draft_width), at=Moment.EXIT),
    ),
    Role.DRAFT: (_BATCH_SIZE, _SELF_STEPS, _spec(Fact.TOPK, Transform.INT, *_of(SELF, _P.topk))),
    Role.DRAFT_FORWARD: (
        _spec(
            Fact.BATCH_SIZE, Transform.INT, *_of(_P.forward_batch_argument, _P.forward_batch_size)
        ),
        _SELF_STEPS,
    ),
    Role.VERIFY: (
        _BATCH_SIZE,
        _spec(Fact.DRAFT_WIDTH, Transform.INT, *_of_batches(_P.verify_draft_width)),
        _spec(Fact.NUM_STEPS, Transform.INT, *_of_batches(_P.verify_num_steps)),
    ),
    Role.DRAFT_EXTEND_PREFILL: (_BATCH_SIZE,),
    Role.DRAFT_EXTEND_DECODE: (_BATCH_SIZE,),
    Role.TARGET_FORWARD: (
        _spec(
            Fact.BATCH_SIZE,
            Transform.INT,
            *_of_batches(_P.batch_size),
            *_of(_P.forward_batch_argument, _P.forward_batch_size),
        ),
        _spec(
            Fact.FORWARD_MODE,
            Transform.NAME,
            *_of_batches(_P.forward_mode, _P.forward_batch_argument),
        ),
        _spec(Fact.IS_VERIFY, Transform.BOOL, (_P.is_verify_argument,)),
    ),
    Role.DECISION: tuple(
        _spec(fact, transform, (DECISION_ARGUMENT, field))
        for fact, transform, field in (
            (Fact.HOOK_STEP, Transform.INT, "step"),
            (Fact.BATCH_SIZE, Transform.INT, "batch_size"),
            (Fact.SPEC_ON, Transform.BOOL, "spec_on"),
            (Fact.CHANGED, Transform.BOOL, "changed"),
            (Fact.REASON, Transform.STR, "reason"),
            (Fact.ACCEPT_LENGTH, Transform.FLOAT, "accept_length"),
            (Fact.STEP_PERIOD, Transform.FLOAT, "step_period_s"),
            (Fact.INTERRUPTED_PERIOD, Transform.FLOAT, "interrupted_period_s"),
            (Fact.SOURCE_RANK, Transform.INT, "source_rank"),
            (Fact.ITERATION, Transform.INT, "iteration"),
            (Fact.ARRIVING, Transform.INT, "arriving"),
            (Fact.COHORT, Transform.INT, "cohort"),
            (Fact.COHORT_TOKENS, Transform.INT, "cohort_tokens"),
            (Fact.WAVE_LENGTHS, Transform.CPU_LIST, "wave_lengths"),
        )
    ),
    Role.OTHER: (),
}


def default_selection(names: Mapping[Role, Iterable[QualName]]) -> Selection:
    """The selection for ``names`` by role, each with its role's extractors.

    ``tracer.static.selection_from_source`` maps the static call graph's findings
    (decode-result handler, speculative worker, ...) to roles and calls this.
    A name listed under two roles keeps the first.
    """
    probes: dict[QualName, Probe] = {}
    for role, role_names in names.items():
        for name in role_names:
            probes.setdefault(name, Probe(name, role, ROLE_FACTS[role]))
    return Selection(tuple(probes.values()))


def restrict_selection(base: Selection, names: Sequence[QualName]) -> Selection:
    """Only ``names`` (``--select``): known names keep their role and extractors; others
    are recorded as :attr:`Role.OTHER` with no facts.

    >>> base = default_selection({Role.VERIFY: [QualName("m", "W.verify")]})
    >>> picked = restrict_selection(base, [QualName("m", "W.verify"), QualName("m", "f")])
    >>> [(p.function.qualname, p.role.value) for p in picked.probes]
    [('W.verify', 'verify'), ('f', 'other')]
    """
    known = {probe.function: probe for probe in base.probes}
    probes = {name: known.get(name, Probe(name, Role.OTHER)) for name in names}
    return Selection(tuple(probes.values()), base.step_paths, base.rank_paths)
