"""What the speculation hook attaches to in one SGLang release: a :class:`HookSpec`.

The hook has three sites, each located by structure in the release's source (``sites.py``):

* **decide** (:attr:`SiteKind.DECIDE`): the decode-result call in ``Scheduler.process_batch_result``
  (``if batch.forward_mode.is_decode(): ...process_batch_result_decode(batch, result)``). Batch
  size and accept lengths are on the CPU there, identical on every TP rank; the policy decides.
* **switch** (:attr:`SiteKind.SWITCH`): the start of the scheduler's prefill scheduling
  (``Scheduler.get_new_batch_prefill``), where the plain off state switches: it retracts the
  running requests into the radix cache and flips the scheduler, its worker and the target's
  model runner between speculative and plain decoding (``sgtrace_payload.plainoff``; every
  name it uses is the release's own, :mod:`sgtrace.sglang.plain_names`).
* **attach** (:attr:`SiteKind.ATTACH`): the end of ``EAGLEWorkerV2.__init__``, where the hook
  readies the plain off state for that worker.

``family`` is the release's :class:`~sgtrace.sglang.family.Family` (read from where upstream
activates its own runtime states); the hook switches on every family alike.

>>> site = Site(SiteKind.DECIDE, QualName("m", "S.f"), QualName("m", "P.g"), "m.py", 3, "g()", None)
>>> site.describe()
'decide: g() in m:S.f (m.py:3)'
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sgtrace.names import QualName
from sgtrace.payload.config import NAMES_KEY, PLAIN_NAMES_KEY, PlainOffNames, SglangNames
from sgtrace.sglang.family import Family


class SiteKind(Enum):
    """The role of a site in the hook."""

    DECIDE = "decide"
    SWITCH = "switch"
    ATTACH = "attach"


@dataclass(frozen=True)
class Site:
    """One located site.

    ``caller`` is the function holding the anchor call (``text``, on ``line`` of ``file``, under
    ``guard``); ``target`` is the function the runtime hook wraps or relies on there. Lines are
    for messages only: every edit is made by structure.
    """

    kind: SiteKind
    caller: QualName
    target: QualName
    file: str
    line: int
    text: str
    guard: str | None

    def describe(self) -> str:
        """One line for reports: ``decide: <anchor> in module:Qual (file:line)``."""
        return f"{self.kind.value}: {self.text} in {self.caller} ({self.file}:{self.line})"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values for the runtime config; no line, which a patch moves."""
        return {
            "kind": self.kind.value,
            "caller": str(self.caller),
            "target": str(self.target),
            "file": self.file,
            "text": self.text,
            "guard": self.guard,
        }


@dataclass(frozen=True)
class HookSpec:
    """Every site of the hook in one release, what it can do there, and what it relies on.

    ``required`` lists the functions the decide and attach sites wrap; ``sites.locate_sites``
    has checked that each is defined in this release, and that the release defines every name
    of the plain off state (``plain_names``).
    """

    source_label: str
    decide: Site
    switch: Site
    attach: Site
    family: Family
    family_reason: str
    required: tuple[QualName, ...]
    names: SglangNames  # the names the payload looks up, this release's (release_names.py)
    plain_names: PlainOffNames  # the plain off state's names in this release

    @property
    def sites(self) -> tuple[Site, ...]:
        """The three sites, in the order decide, switch, attach."""
        return (self.decide, self.switch, self.attach)

    def runtime_config(self) -> dict[str, object]:
        """The part of the runtime hook's JSON config that comes from the source and the map
        (``sglang_names`` and ``plain_off_names``: every SGLang name the payload looks up, as
        it holds none itself, as this release has them).

        >>> site = Site(SiteKind.DECIDE, QualName("m", "S.f"), QualName("m", "g"), "m", 3, "", None)
        >>> from sgtrace.sglang.runtime_names import runtime_names
        >>> from sgtrace.sglang.plain_names import plain_off_names
        >>> spec = HookSpec(
        ...     "x", site, site, site, Family.RUNTIME_STATES, "old", (), runtime_names(),
        ...     plain_off_names())
        >>> print(*sorted(spec.runtime_config()))
        family family_reason patch plain_off_names sglang_names sites source
        """
        return {
            "source": self.source_label,
            "family": self.family.value,
            "family_reason": self.family_reason,
            "patch": {
                "decide": _module_and_qualname(self.decide.target),
                "attach": _module_and_qualname(self.attach.target),
            },
            "sites": [site.to_dict() for site in self.sites],
            NAMES_KEY: self.names.to_dict(),
            PLAIN_NAMES_KEY: self.plain_names.to_dict(),
        }

    def does(self) -> str:
        """One line for the CLI: what the hook does on this release."""
        plain = self.plain_names
        return (
            "switches: off runs SGLang's plain decode path (the target's DECODE CUDA graphs, "
            "no draft); a switch re-admits the running requests before "
            f"{plain.switch_module}:{plain.switch_qualname}"
        )

    def summary(self) -> str:
        """Several lines for the CLI: the sites, the family and why."""
        lines = [f"sgtrace hook sites in {self.source_label}:"]
        lines.extend(f"  {site.describe()}" for site in self.sites)
        lines.append(f"  family: {self.family.value} ({self.family_reason})")
        return "\n".join(lines)


def _module_and_qualname(name: QualName) -> dict[str, str]:
    return {"module": name.module, "qualname": name.qualname}
