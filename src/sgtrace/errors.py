"""Errors of sgtrace.

Two families with two exit codes, as in click: :class:`SgtraceError` means sgtrace could not
run (bad input, missing source, missing Graphviz: exit 2); :class:`ProblemFound` means it ran
and found what the user asked it to look for to be wrong (a validation failure: exit 1).
Every message says what failed, where, and what to try.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SgtraceError(Exception):
    """sgtrace could not do what was asked. Exit code 2."""

    exit_code = 2


class NameSyntaxError(SgtraceError):
    """A qualified name is not written ``module:Qual.name``."""


class SourceError(SgtraceError):
    """The analysed source could not be located, downloaded or unpacked."""


class TargetNotFoundError(SgtraceError):
    """A command's TARGET (file, module, package) is not in the analysed source."""


class UnknownNameError(SgtraceError):
    """A function or class name matches nothing; carries close matches."""

    def __init__(self, name: str, candidates: Iterable[str], where: str = "") -> None:
        self.name = name
        self.suggestions = suggest(name, candidates)
        hint = (
            "; did you mean " + ", ".join(self.suggestions) + "?"
            if self.suggestions
            else "; try a bare name, Class.method or module:qualname"
        )
        super().__init__(f"no function or class named {name!r}{where}{hint}")


class OutputFormatError(SgtraceError):
    """The output format cannot be told from ``-o``'s extension, or contradicts it."""


class GraphvizMissingError(SgtraceError):
    """The Graphviz ``dot`` program is needed for SVG output and is not installed."""


class ConfigError(SgtraceError):
    """A policy or hook configuration is invalid."""


class HookSiteNotFoundError(SgtraceError):
    """The structure a hook relies on is not in this release's source."""


class TraceReadError(SgtraceError):
    """A trace directory cannot be read."""


class ProblemFound(Exception):
    """sgtrace ran and found a problem (for example a failed validation). Exit code 1."""

    exit_code = 1


def suggest(name: str, candidates: Iterable[str], limit: int = 5) -> list[str]:
    """Close matches of ``name`` among ``candidates``, best first.

    >>> suggest("proces_batch", ["process_batch", "run_batch", "stop"])
    ['process_batch']
    """
    pool = sorted(set(candidates))
    tail = name.rsplit(".", 1)[-1].rsplit(":", 1)[-1]
    by_tail: dict[str, list[str]] = {}
    for cand in pool:
        by_tail.setdefault(cand.rsplit(".", 1)[-1].rsplit(":", 1)[-1], []).append(cand)
    close = difflib.get_close_matches(name, pool, n=limit, cutoff=0.75)
    for short in difflib.get_close_matches(tail, list(by_tail), n=limit, cutoff=0.75):
        close.extend(by_tail[short])
    seen: list[str] = []
    for item in close:
        if item not in seen:
            seen.append(item)
    return seen[:limit]
