"""sgtrace: static and dynamic source tracing for SGLang internals.

The static engine builds call graphs and finds call sites without importing the analysed code::

    from sgtrace import Project, build_call_graph, find_name, open_source

    project = Project(open_source("sglang==0.5.9"))
    result = find_name(project, "process_batch_result_decode")
    graph = build_call_graph(project, ["scheduler.py"])

Names of functions are :class:`QualName` values, written ``module:Qual.name``.

The names below are imported from their modules on first use, so that importing a submodule
(the command line does, for every run) does not load the whole engine first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sgtrace.errors import ProblemFound, SgtraceError
    from sgtrace.graphs.build import Direction, Project, build_call_graph
    from sgtrace.graphs.find import FindResult, find_name
    from sgtrace.graphs.model import CallGraph, CallSite
    from sgtrace.graphs.render import render_dot, render_json, render_svg, render_text
    from sgtrace.graphs.source import SourceTree, open_source
    from sgtrace.names import QualName

_HOMES = {
    "CallGraph": "sgtrace.graphs.model",
    "CallSite": "sgtrace.graphs.model",
    "Direction": "sgtrace.graphs.build",
    "FindResult": "sgtrace.graphs.find",
    "ProblemFound": "sgtrace.errors",
    "Project": "sgtrace.graphs.build",
    "QualName": "sgtrace.names",
    "SgtraceError": "sgtrace.errors",
    "SourceTree": "sgtrace.graphs.source",
    "build_call_graph": "sgtrace.graphs.build",
    "find_name": "sgtrace.graphs.find",
    "open_source": "sgtrace.graphs.source",
    "render_dot": "sgtrace.graphs.render",
    "render_json": "sgtrace.graphs.render",
    "render_svg": "sgtrace.graphs.render",
    "render_text": "sgtrace.graphs.render",
}

__all__ = [
    "CallGraph",
    "CallSite",
    "Direction",
    "FindResult",
    "ProblemFound",
    "Project",
    "QualName",
    "SgtraceError",
    "SourceTree",
    "build_call_graph",
    "find_name",
    "open_source",
    "render_dot",
    "render_json",
    "render_svg",
    "render_text",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """Import a public name from its module when it is first asked for (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sgtrace' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
