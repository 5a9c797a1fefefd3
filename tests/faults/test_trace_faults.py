"""Faults of the trace readers (issue 23): a real trace damaged line by line and file by file.

The trace is the live SGLang 0.5.16 run with the hook (``bench/results/live``); each damage
must give one warning naming the file and line while the rest validates as before. Each test
was written to fail on the code before the fix; its docstring says how it failed.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from sgtrace.cli import main
from sgtrace.tracer.load import ReadBytes, hook_off_state, load_trace
from sgtrace.tracer.merge import render_chrome_trace
from sgtrace.tracer.report import render_report
from sgtrace.tracer.rules import step_rules_for
from sgtrace.tracer.validate import check_trace
from tests.faults.runtime_support import insert_line

LIVE = Path(__file__).resolve().parents[2] / "bench/results/live/traces_hook_0.5.16.tgz"
SCHEDULER = "events-983.jsonl"  # rank 0's scheduler process: 15,404 lines
LIVE_OK = "OK: 1908 steps on rank 0 (1910 decisions) hold the on/off rules and agree across ranks."
DECODE_RESULT = (
    '{"type":"call","fn":"sglang.srt.managers.scheduler_components.batch_result_processor:'
    'SchedulerBatchResultProcessor.process_batch_result_decode","role":"decode_result","rank":0,'
    '"step":2,"t0":180774293902,"dur":252488,"tid":140276034704128,"facts":{"batch_size":1,'
    '"accept_lengths":[1],"accepted_drafts":0}}'
)
BAD_LINES = {
    "non_utf8": (b'{"type":"call","fn":"m:\xff"}', "not UTF-8 (byte 0xff at column 24)"),
    "huge_integer": (
        DECODE_RESULT.replace('"t0":180774293902', '"t0":' + "9" * 5000).encode(),
        "not JSON (Exceeds the limit (4300 digits) for integer string conversion: value has "
        "5000 digits; use sys.set_int_max_str_digits() to increase the limit)",
    ),
    "integer_out_of_range": (
        DECODE_RESULT.replace('"t0":180774293902', '"t0":' + "9" * 400).encode(),
        "start_ns out of range (99999999999999999999..., 400 digits)",
    ),
    "deeply_nested": (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deep"),
    "nan_accept_lengths": (
        DECODE_RESULT.replace('"accept_lengths":[1]', '"accept_lengths":[NaN]').encode(),
        "a fact is not a finite number (batch_size=1, accept_lengths=[nan], accepted_drafts=0)",
    ),
    "negative_duration": (
        DECODE_RESULT.replace('"dur":252488', '"dur":-252488').encode(),
        "negative duration -252488 ns",
    ),
}


@pytest.fixture(scope="module")
def live_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("live")
    with tarfile.open(LIVE) as archive:
        archive.extractall(folder, filter="data")
    return folder / ".carry/hook-check/hook_bs"


@pytest.fixture
def trace(live_trace: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(live_trace, tmp_path / "trace"))


def assert_warned(trace: Path, *warnings: str, read_bytes: ReadBytes = Path.read_bytes) -> None:
    """The trace validates as before the damage, with exactly ``warnings`` as notes."""
    rules = step_rules_for(hook_off_state(trace))  # an older hook's: the zero-step rules
    verdict = check_trace(load_trace(trace, read_bytes), rules)
    expected = "\n".join([LIVE_OK, *(f"note: warning: {w}" for w in warnings)])
    assert verdict.render() == expected, f"\nexpected:\n{expected}\nseen:\n{verdict.render()}"


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_line_is_one_warning_and_the_rest_is_loaded(trace: Path, case: str) -> None:
    """Before: tracebacks (non-UTF-8, deep JSON), the whole load refused (a long integer), or
    the value accepted (NaN accept lengths, negative durations)."""
    line, reason = BAD_LINES[case]
    insert_line(trace / SCHEDULER, 11, line)
    assert_warned(trace, f"{trace / SCHEDULER}:11: skipped: {reason}")


def test_files_that_cannot_be_read_are_one_warning_each(trace: Path) -> None:
    """Before: IsADirectoryError, OSError (symlink loop) and PermissionError tracebacks; a FIFO
    named like an events file hung the loader."""
    (trace / "events-1.jsonl").mkdir()
    (trace / "events-2.jsonl").symlink_to("events-2.jsonl")
    os.mkfifo(trace / "events-3.jsonl")
    (trace / "events-4.jsonl").write_bytes((trace / "events-984.jsonl").read_bytes())

    def read_bytes(path: Path) -> bytes:
        if path.name == "events-4.jsonl":
            raise PermissionError(13, "Permission denied", str(path))
        return path.read_bytes()

    assert_warned(
        trace,
        f"{trace}/events-1.jsonl: skipped: cannot read it: not a regular file (a directory)",
        f"{trace}/events-2.jsonl: skipped: cannot read it: Too many levels of symbolic links",
        f"{trace}/events-3.jsonl: skipped: cannot read it: not a regular file (a FIFO)",
        f"{trace}/events-4.jsonl: skipped: cannot read it: Permission denied",
        read_bytes=read_bytes,
    )


def test_two_files_of_one_process_are_read_once(trace: Path) -> None:
    """Before: both were read and every call of the process counted twice."""
    shutil.copy(trace / SCHEDULER, trace / "events-99983.jsonl")
    assert_warned(
        trace,
        f"{trace}/events-99983.jsonl:1: file skipped: process 983 was already read from "
        f"{SCHEDULER}; its calls would count twice (two traces in one directory?)",
    )


def test_a_trace_with_nothing_usable_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "events-1.jsonl").mkdir()
    (tmp_path / "events-2.jsonl").write_bytes(b"\xff\n")
    result = CliRunner().invoke(main, ["validate", str(tmp_path)])
    assert (result.exit_code, result.output) == (
        2,
        f"Error: nothing usable in {tmp_path}:\n"
        f"  {tmp_path}/events-1.jsonl: skipped: cannot read it: not a regular file (a directory)\n"
        f"  {tmp_path}/events-2.jsonl:1: file skipped: not UTF-8 (byte 0xff at column 1)\n",
    )


def test_report_and_merge_read_a_damaged_trace(trace: Path, tmp_path: Path) -> None:
    insert_line(trace / SCHEDULER, 11, BAD_LINES["deeply_nested"][0])
    loaded = load_trace(trace)
    assert len(loaded.events) == len(load_trace(trace).events)
    report = render_report(trace, tmp_path / "report.html")
    assert report.read_text("utf-8").startswith("<!DOCTYPE html>\n<html><head><meta charset")
    merged = render_chrome_trace(loaded)
    assert merged["otherData"] == {"generator": "sgtrace", "processes": len(loaded.processes)}


def test_many_bad_lines_in_one_file_are_counted_after_ten_warnings(trace: Path) -> None:
    for number in range(11, 36):  # 25 lines
        insert_line(trace / SCHEDULER, number, BAD_LINES["negative_duration"][0])
    assert_warned(
        trace,
        *(f"{trace / SCHEDULER}:{n}: skipped: negative duration -252488 ns" for n in range(11, 21)),
        f"{trace / SCHEDULER}: 15 more lines skipped (not shown)",
    )


def test_report_prints_what_the_loader_skipped(trace: Path, tmp_path: Path) -> None:
    """Before: ``sgtrace report`` drew a damaged trace without a word about the skipped line."""
    insert_line(trace / SCHEDULER, 11, BAD_LINES["negative_duration"][0])
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", str(trace), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"warning: {trace / SCHEDULER}:11: skipped: negative duration -252488 ns\nwrote {out}\n"
    )
