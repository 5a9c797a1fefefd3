"""sgtrace: static and dynamic source tracing for SGLang internals.

The static engine builds call graphs and finds call sites without importing the analysed code::

    from sgtrace import Project, build_call_graph, find_name, open_source

    project = Project(open_source("sglang==0.5.9"))
    result = find_name(project, "process_batch_result_decode")
    graph = build_call_graph(project, ["scheduler.py"])

Names of functions are :class:`QualName` values, written ``module:Qual.name``.
"""

from sgtrace.errors import ProblemFound, SgtraceError
from sgtrace.graphs.build import Direction, Project, build_call_graph
from sgtrace.graphs.find import FindResult, find_name
from sgtrace.graphs.model import CallGraph, CallSite
from sgtrace.graphs.render import render_dot, render_json, render_svg, render_text
from sgtrace.graphs.source import SourceTree, open_source
from sgtrace.names import QualName

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
