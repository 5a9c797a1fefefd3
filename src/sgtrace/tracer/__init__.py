"""The runtime tracer: record what ran in SGLang's processes, validate it, draw it.

``run_traced`` (``sgtrace trace``), ``validate_trace`` (``sgtrace validate``) and
``render_report`` (``sgtrace report``) are the three entry points the CLI calls.
"""

from sgtrace.tracer.events import Backend, Fact, Facts, Role, TraceEvent
from sgtrace.tracer.launch import DeepDive, TraceRun, prepare_trace_dir, run_traced
from sgtrace.tracer.load import Trace, load_trace
from sgtrace.tracer.merge import render_chrome_trace, write_chrome_trace
from sgtrace.tracer.report import render_report
from sgtrace.tracer.rules import PLAIN_OFF_STEP_RULES, ZERO_STEP_RULES, OffState, Rule, StepRules
from sgtrace.tracer.selection import Probe, Selection, default_selection, restrict_selection
from sgtrace.tracer.steps import Decision, StepRecord, decisions_of, group_steps
from sgtrace.tracer.validate import PolicyReplay, Verdict, Violation, check_trace, validate_trace

__all__ = [
    "PLAIN_OFF_STEP_RULES",
    "ZERO_STEP_RULES",
    "Backend",
    "Decision",
    "DeepDive",
    "Fact",
    "Facts",
    "OffState",
    "PolicyReplay",
    "Probe",
    "Role",
    "Rule",
    "Selection",
    "StepRecord",
    "StepRules",
    "Trace",
    "TraceEvent",
    "TraceRun",
    "Verdict",
    "Violation",
    "check_trace",
    "decisions_of",
    "default_selection",
    "group_steps",
    "load_trace",
    "prepare_trace_dir",
    "render_chrome_trace",
    "render_report",
    "restrict_selection",
    "run_traced",
    "validate_trace",
    "write_chrome_trace",
]
