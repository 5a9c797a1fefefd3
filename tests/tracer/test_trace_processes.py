"""The tracer in real processes: spawned schedulers per TP rank, killed by SIGKILL.

Every test runs ``programs/fakeserve`` under ``run_traced`` and compares what was recorded with
what the program did, call by call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tracer_support import (
    BUSY_CALLS_PER_RANK,
    EXPECTED_CALLS,
    PROGRAMS,
    FakeRun,
    RunFakeserve,
    fakeserve_selection,
    has_module,
    run_fakeserve_into,
)

from sgtrace.bootstrap import MANIFEST, BootPlugin, render_boot_files
from sgtrace.errors import SgtraceError, TraceReadError
from sgtrace.names import QualName
from sgtrace.payload.record import DecisionLog
from sgtrace.payload.registry import PluginKind
from sgtrace.tracer.events import Backend, Role
from sgtrace.tracer.launch import DeepDive, run_traced
from sgtrace.tracer.selection import HOOK_DECISION, Selection, restrict_selection


def calls_of(run: FakeRun, rank: int) -> list[tuple[int | None, str, dict[str, object]]]:
    """(step, role, facts) of one rank's calls, in the order they started."""
    return [
        (event.step, event.role.value, event.facts.to_json())
        for event in run.trace.events
        if event.rank == rank
    ]


def assert_recorded_every_call(run: FakeRun) -> None:
    """Both ranks recorded exactly the calls fakeserve made, with their facts."""
    assert "killed -9 -9" in run.stdout, str(run)
    for rank in (0, 1):
        assert calls_of(run, rank) == EXPECTED_CALLS, f"rank {rank}\n{run}"
    assert run.trace.remarks() == ()


def scheduler_pids(run: FakeRun) -> set[int]:
    return {event.pid for event in run.trace.events}


def test_profile_backend_records_every_call_of_killed_schedulers(
    run_fakeserve: RunFakeserve,
) -> None:
    run = run_fakeserve(sys.executable, backend=Backend.PROFILE)
    assert_recorded_every_call(run)
    assert {p.backend for p in run.trace.processes} == {Backend.PROFILE}


def test_monitoring_backend_records_every_call_of_killed_schedulers(
    run_fakeserve: RunFakeserve, python312: str
) -> None:
    run = run_fakeserve(python312, backend=Backend.MONITORING)
    assert_recorded_every_call(run)
    assert {p.backend for p in run.trace.processes} == {Backend.MONITORING}


def test_auto_backend_is_the_one_this_python_supports(run_fakeserve: RunFakeserve) -> None:
    run = run_fakeserve(sys.executable)
    expected = Backend.MONITORING if sys.version_info >= (3, 12) else Backend.PROFILE
    assert {p.backend for p in run.trace.processes} == {expected}
    assert_recorded_every_call(run)


def test_monitoring_requested_on_an_old_python_falls_back_and_says_so(
    run_fakeserve: RunFakeserve,
) -> None:
    if sys.version_info >= (3, 12):
        pytest.skip("this Python has sys.monitoring")
    run = run_fakeserve(sys.executable, backend=Backend.MONITORING)
    assert {p.backend for p in run.trace.processes} == {Backend.PROFILE}
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    why = f"sys.monitoring needs Python 3.12+, this is {minor}: using sys.setprofile"
    assert {note.text for note in run.trace.notes} == {why}
    assert f"sgtrace: {why}" in run.stderr
    assert calls_of(run, 0) == EXPECTED_CALLS


def test_every_process_gets_a_file_and_the_schedulers_are_spawned_children(
    run_fakeserve: RunFakeserve,
) -> None:
    run = run_fakeserve()
    parent = [p for p in run.trace.processes if p.argv[1:3] == ("-m", "fakeserve.launch")]
    assert len(parent) == 1, str(run)
    schedulers = [p for p in run.trace.processes if p.pid in scheduler_pids(run)]
    assert len(schedulers) == 2
    for process in schedulers:
        assert process.ppid == parent[0].pid
        assert "--multiprocessing-fork" in process.argv
    ranks = sorted(tuple({e.rank for e in run.trace.events if e.pid == p.pid}) for p in schedulers)
    assert ranks == [(0,), (1,)]


def test_a_call_still_running_at_sigkill_is_not_recorded_but_was_attached(
    run_fakeserve: RunFakeserve,
) -> None:
    run = run_fakeserve()
    wait = QualName("fakeserve.scheduler", "Scheduler.wait_for_requests")
    attached = {a.pid for a in run.trace.attachments if a.function == wait and a.is_attached}
    assert scheduler_pids(run) <= attached
    assert [e for e in run.trace.events if e.function == wait] == []


def test_select_records_only_the_named_functions(run_fakeserve: RunFakeserve) -> None:
    busy = QualName("fakeserve.workers", "busy")
    step = QualName("fakeserve.scheduler", "Scheduler.run_batch")
    selection = restrict_selection(fakeserve_selection(), [step, busy])
    run = run_fakeserve(selection=selection)
    assert {(e.function, e.role) for e in run.trace.events} == {
        (step, Role.STEP),
        (busy, Role.OTHER),
    }
    for rank in (0, 1):
        busy_calls = [e for e in run.trace.events if e.rank == rank and e.function == busy]
        assert len(busy_calls) == BUSY_CALLS_PER_RANK
        assert [e.step for e in run.trace.events if e.rank == rank and e.function == step] == [
            1,
            2,
            3,
            4,
            5,
            6,
        ]


def test_unknown_selected_names_are_reported(run_fakeserve: RunFakeserve) -> None:
    missing = QualName("fakeserve.workers", "SpecWorker.no_such_method")
    never = QualName("fakeserve.never_imported", "f")
    step = QualName("fakeserve.scheduler", "Scheduler.run_batch")
    run = run_fakeserve(selection=restrict_selection(Selection(()), [step, missing, never]))
    details = {(a.function, a.detail) for a in run.trace.attachments if not a.is_attached}
    assert details == {(missing, "fakeserve.workers has no attribute 'SpecWorker.no_such_method'")}
    assert run.trace.remarks() == (
        f"selected but attached in no process: {missing}",
        f"selected but attached in no process: {never}",
    )


def test_fork_children_write_their_own_file(run_fakeserve: RunFakeserve) -> None:
    run = run_fakeserve(start_method="fork")
    by_pid = {p.pid: p for p in run.trace.processes}
    for pid in scheduler_pids(run):
        assert by_pid[pid].path.name == f"events-{pid}.jsonl"
        assert by_pid[by_pid[pid].ppid].argv[1:3] == ("-m", "fakeserve.launch")
    assert calls_of(run, 0) == EXPECTED_CALLS
    assert calls_of(run, 1) == EXPECTED_CALLS


def test_the_shadowed_sitecustomize_still_runs_in_every_process(
    run_fakeserve: RunFakeserve, tmp_path: Path
) -> None:
    mark = tmp_path / "shadowed.txt"
    run = run_fakeserve(extra_path=[PROGRAMS / "shadowed"], extra_env={"SHADOWED_MARK": str(mark)})
    ran_in = {int(line) for line in mark.read_text().split()}
    assert ran_in == {p.pid for p in run.trace.processes}


def test_trace_attaches_to_a_hook_directory(tmp_path: Path) -> None:
    """The hook's plugin is installed in every process (here with a damaged config: it says so
    once per process and leaves the program alone), and the tracer records the decisions handed
    to the hook directory's copy of the payload."""
    hook_dir = tmp_path / "hook"
    plugin = BootPlugin(PluginKind.HOOK, "sgtrace_hook.json", "{not json")
    for name, text in render_boot_files([plugin]).items():
        (hook_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (hook_dir / name).write_text(text)
    run = run_fakeserve_into(hook_dir)
    manifest = json.loads((hook_dir / MANIFEST).read_text())
    assert [p["kind"] for p in manifest["plugins"]] == ["hook", "tracer", "deep-dive"]
    disabled = "sgtrace-hook: disabled, speculation runs as launched: cannot read "
    assert run.stderr.count(disabled) == len(run.trace.processes), run.stderr
    details = {a.detail for a in run.trace.attachments if a.function == HOOK_DECISION}
    line = DecisionLog.record.__code__.co_firstlineno
    assert details == {f"{hook_dir / 'sgtrace_payload' / 'record.py'}:{line}"}
    assert calls_of(run, 0) == EXPECTED_CALLS


def test_deep_dive_saves_viztracer_files_around_each_toggle(
    run_fakeserve: RunFakeserve, python312: str
) -> None:
    if not has_module(python312, "viztracer"):
        pytest.skip(f"viztracer is not installed in {python312}")
    run = run_fakeserve(python312, plan="2,2,8,8,8,2,2", deep_dive=DeepDive(window=1))
    assert calls_of(run, 0)[:10] == EXPECTED_CALLS[:10]
    dives = sorted((d.toggles, d.last_step) for d in run.trace.deep_dives)
    assert dives == [((4,), 5), ((4,), 5), ((7,), 8), ((7,), 8)]
    for dive in run.trace.deep_dives:
        data = json.loads(dive.path.read_text())
        names = {e.get("name", "") for e in data["traceEvents"]}
        assert any(name.startswith("busy (") for name in names), dive.path
        marks = sorted(n for n in names if n.startswith("sgtrace step "))
        assert f"sgtrace step {dive.last_step} ends" in marks
        assert data["viztracer_metadata"]["overflow"] is False


def test_deep_dive_without_sys_monitoring_says_why_and_records_normally(
    run_fakeserve: RunFakeserve,
) -> None:
    run = run_fakeserve(sys.executable, backend=Backend.PROFILE, deep_dive=DeepDive(window=1))
    why = (
        "deep dive (--full) needs the sys.monitoring backend (Python 3.12+), since viztracer's "
        "profiler would replace sys.setprofile; recording the selected functions only"
    )
    assert {note.text for note in run.trace.notes} == {why}
    assert run.stderr.count(f"sgtrace: {why}") == len(run.trace.processes)
    assert run.trace.deep_dives == ()
    assert calls_of(run, 1) == EXPECTED_CALLS


def test_a_command_without_python_leaves_no_trace(tmp_path: Path) -> None:
    with pytest.raises(TraceReadError, match="no Python process ran with the tracer"):
        run_traced(["true"], tmp_path / "t", Selection(()))


def test_an_earlier_trace_is_never_mixed_in(tmp_path: Path) -> None:
    (tmp_path / "events-1.jsonl").write_text("")
    with pytest.raises(SgtraceError, match="already holds a trace"):
        run_traced(["true"], tmp_path, Selection(()))


def test_a_missing_command_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SgtraceError, match="cannot run 'no-such-program-sgtrace'"):
        run_traced(["no-such-program-sgtrace"], tmp_path / "t", Selection(()))
