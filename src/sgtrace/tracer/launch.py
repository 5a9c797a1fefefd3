"""Run a command with the tracer installed in every Python process it starts.

:func:`prepare_trace_dir` writes the tracer plugin into a bootstrap directory (merging into a
hook directory made by ``sgtrace inject-hook --mode runtime``: that is how ``trace`` attaches
to a hook); :func:`run_traced` also puts the directory first on ``PYTHONPATH``, runs the
command, and merges the per-process files into ``trace.json``. One directory holds it all:
boot files, ``events-<pid>.jsonl``, ``trace.json``, and ``deep-dive/`` with ``--full``.

>>> tracer, deep_dive = tracer_plugins(Selection(()), Backend.AUTO, None)
>>> tracer.config_name, sorted(json.loads(tracer.config)), json.loads(deep_dive.config)
('sgtrace_tracer.json', ['backend', 'out_dir', 'probes', 'rank_paths', 'step_paths'], \
{'window': None, 'entries': None})
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from sgtrace.bootstrap import MANIFEST, BootPlugin, render_boot_files
from sgtrace.errors import SgtraceError
from sgtrace.payload.registry import PluginKind
from sgtrace.tracer.events import Backend
from sgtrace.tracer.load import EVENTS_GLOB, load_trace
from sgtrace.tracer.merge import MERGED_FILE, write_chrome_trace
from sgtrace.tracer.selection import Selection

TRACER_CONFIG = "sgtrace_tracer.json"  # the config of sgtrace_payload.tracer
DEEP_DIVE_CONFIG = "sgtrace_deepdive.json"  # of sgtrace_payload.deepdive, installed after it


@dataclass(frozen=True)
class DeepDive:
    """``--full --window N``: viztracer records every call; ``window`` steps after each toggle
    of the decision its ring buffer (``entries`` calls, older ones dropped) is saved."""

    window: int
    entries: int = 1_000_000

    def __post_init__(self) -> None:
        if self.window < 1 or self.entries < 1000:
            raise SgtraceError(
                f"--window must be at least 1 and the buffer at least 1000 entries: {self}"
            )


@dataclass(frozen=True)
class TraceRun:
    """What ``sgtrace trace`` did: the command's exit status and what was recorded."""

    out_dir: Path
    returncode: int
    processes: int
    events: int
    chrome_trace: Path
    notes: tuple[str, ...]


Launcher = Callable[[Sequence[str], Mapping[str, str]], int]


def tracer_plugins(
    selection: Selection, backend: Backend, deep_dive: DeepDive | None
) -> list[BootPlugin]:
    """The tracer's plugin and the deep-dive plugin (idle without ``deep_dive``) with their JSON
    configs. Both are always written, so a directory traced before with ``--full`` does not
    keep deep-diving."""
    # "." is the directory of the plugin itself: a trace directory can be prepared on one
    # machine and used on another (the live harness carries it to the GPU machine)
    config: dict[str, object] = {"out_dir": ".", "backend": backend.value}
    config.update(selection.to_json())
    full = {"window": None, "entries": None} if deep_dive is None else asdict(deep_dive)
    return [
        BootPlugin(PluginKind.TRACER, TRACER_CONFIG, _json(config)),
        BootPlugin(PluginKind.DEEP_DIVE, DEEP_DIVE_CONFIG, _json(full)),
    ]


def _json(data: object) -> str:
    return json.dumps(data, indent=2) + "\n"


def prepare_trace_dir(
    out_dir: Path,
    selection: Selection,
    *,
    backend: Backend = Backend.AUTO,
    deep_dive: DeepDive | None = None,
) -> Path:
    """Write the tracer into ``out_dir`` (created; a hook directory there is kept) and return
    it. Put it first on ``PYTHONPATH`` to trace a command run some other way."""
    out_dir.mkdir(parents=True, exist_ok=True)
    earlier = sorted(out_dir.glob(EVENTS_GLOB))
    if earlier:
        raise SgtraceError(
            f"{out_dir} already holds a trace ({len(earlier)} {EVENTS_GLOB} files); choose "
            "another --out or delete those files"
        )
    manifest = out_dir / MANIFEST
    existing = manifest.read_text(encoding="utf-8") if manifest.is_file() else None
    files = render_boot_files(tracer_plugins(selection, backend, deep_dive), existing)
    for name, text in files.items():
        (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (out_dir / name).write_text(text, encoding="utf-8")
    return out_dir


def traced_environment(out_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``out_dir`` first on ``PYTHONPATH``."""
    paths = [str(out_dir.absolute())] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def launch_command(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``command`` and wait. Ctrl-C reaches the command's processes too (same process
    group), so on ``KeyboardInterrupt`` this waits for them to shut down."""
    try:
        process = subprocess.Popen(list(command), env=dict(env))
    except OSError as exc:
        raise SgtraceError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from exc
    try:
        return process.wait()
    except KeyboardInterrupt:
        return process.wait()


def run_traced(
    command: Sequence[str],
    out_dir: Path,
    selection: Selection,
    *,
    backend: Backend = Backend.AUTO,
    deep_dive: DeepDive | None = None,
    env: Mapping[str, str] | None = None,
    launcher: Launcher = launch_command,
) -> TraceRun:
    """Run ``command`` traced into ``out_dir``; merge the result into ``out_dir/trace.json``.

    ``env`` defaults to this process's environment; ``launcher`` runs the command (tests and
    the live harness pass their own). ``TraceReadError`` if no Python process was traced.
    """
    if not command:
        raise SgtraceError(
            "no command to trace; write it after --: sgtrace trace --out DIR -- python -m "
            "sglang.launch_server ..."
        )
    prepare_trace_dir(out_dir, selection, backend=backend, deep_dive=deep_dive)
    returncode = launcher(command, traced_environment(out_dir, os.environ if env is None else env))
    trace = load_trace(out_dir)
    merged = write_chrome_trace(trace, out_dir / MERGED_FILE)
    return TraceRun(
        out_dir, returncode, len(trace.processes), len(trace.events), merged, trace.remarks()
    )
