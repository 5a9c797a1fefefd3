"""The pictures of docs/ and of the lab book: call graphs drawn by ``sgtrace callgraph`` now, and
live pictures drawn from recorded runs (kept as committed, only checked).

A call graph's DOT is captioned with the release, its title and the command that drew it, then
Graphviz turns it into SVG.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sgtrace_run import DOCS, REPO, DocsBuildError, run_sgtrace

IMG = DOCS / "img"
LABBOOK = REPO / "bench" / "results" / "LABBOOK.md"  # the history of the experiments
LAB_IMG = LABBOOK.parent / "img"


@dataclass(frozen=True)
class Picture:
    """One rendered call graph: what it shows and the ``sgtrace callgraph`` arguments.

    >>> Picture("x", "sglang==0.5.9", "the loop", focus=("Scheduler.run_batch",)).command
    'sgtrace callgraph --source sglang==0.5.9 --focus Scheduler.run_batch --depth 1 --format dot'
    """

    name: str
    source: str  # sglang==X.Y.Z, or a directory relative to the repository (src)
    title: str
    targets: tuple[str, ...] = ()
    focus: tuple[str, ...] = ()
    depth: int = 1
    direction: str = "callees"

    @property
    def argv(self) -> list[str]:
        args = ["callgraph", *self.targets, "--source", self.source]
        for name in self.focus:
            args += ["--focus", name]
        args += ["--depth", str(self.depth)]
        if self.direction != "callees":
            args += ["--direction", self.direction]
        return [*args, "--format", "dot"]

    @property
    def command(self) -> str:
        return shlex.join(["sgtrace", *self.argv])

    @property
    def needs_network(self) -> bool:
        """Whether the picture analyses a release from PyPI (downloaded once, then cached)."""
        return "==" in self.source

    @property
    def release(self) -> str:
        return self.source if self.needs_network else f"sgtrace ({self.source}/)"


LOOP = ("Scheduler.event_loop_overlap", "Scheduler.event_loop_overlap.<locals>.pop_and_process")
PHASES = (
    "EagleDraftWorker.draft",
    "EAGLEWorkerV2.verify",
    "EagleDraftWorker._draft_extend_for_decode",
)


def _release_pictures(version: str) -> list[Picture]:
    """The decode path of one SGLang release, in five pictures of about 10 to 30 functions."""
    src = f"sglang=={version}"
    return [
        Picture(f"decode-loop-{version}", src, "the overlap event loop: run a batch, then process the previous result", focus=LOOP),
        Picture(f"batch-result-{version}", src, "where a batch result goes, by forward mode", focus=("Scheduler.process_batch_result",)),
        Picture(f"spec-worker-step-{version}", src, "who calls the EAGLE v2 worker's step, and the phases it runs", focus=("EAGLEWorkerV2.forward_batch_generation",), direction="both"),
        Picture(f"spec-worker-phases-{version}", src, "the speculative worker on its own: draft, verify, draft extend", focus=PHASES),
        Picture(f"decode-result-{version}", src, "what handling a decode result calls", focus=("process_batch_result_decode",)),
    ]  # fmt: skip


PICTURES: tuple[Picture, ...] = (
    *_release_pictures("0.5.9"),
    *_release_pictures("0.5.23"),
    Picture("sgtrace-cli", "src", "sgtrace's own commands and what they call", targets=("sgtrace.cli",)),
)  # fmt: skip


@dataclass(frozen=True)
class LivePicture:
    """A picture drawn from a recorded run (not a call graph): its file, what made it, from what.

    It is exempt from regeneration (the run needs a GPU and an SGLang server), but a page must
    show it with ``command`` in its caption, and ``recorded`` must be in the repository. Pictures
    of docs/ live in ``docs/img``, those of the lab book in ``bench/results/img``.

    >>> LivePicture("x", "sgtrace report hook -o docs/img/x.svg", "bench/x.tgz").path.name
    'x.svg'
    """

    name: str
    command: str  # the command that drew it, as written in the caption of the page showing it
    recorded: str  # the recorded input, relative to the repository root
    folder: Path = IMG

    @property
    def path(self) -> Path:
        return self.folder / f"{self.name}.svg"

    @property
    def pages(self) -> list[Path]:
        """The pages that may show it: docs/*.md for docs/img, the lab book for its pictures."""
        return [LABBOOK] if self.folder == LAB_IMG else sorted(DOCS.glob("*.md"))


def _sweep_picture(name: str, calls: str, recorded: str, extra: str = "") -> LivePicture:
    """A lab-book plot of recorded sweeps: ``sweep_report.py CALLS... --plot``."""
    runs = " ".join(f"bench/results/live/sweep/call{n}" for n in calls.split())
    plot = f"--plot bench/results/img/{name}.svg"
    command = f"python bench/live/sweep_report.py {runs} {extra}{plot}"
    return LivePicture(name, command, f"bench/results/live/sweep/{recorded}", LAB_IMG)


LIVE_PICTURES: tuple[LivePicture, ...] = (
    LivePicture(
        "live-hook-report-0.5.16",
        "sgtrace report .carry/hook-check/hook_bs -o docs/img/live-hook-report-0.5.16.svg",
        "bench/results/live/traces_hook_0.5.16.tgz",
    ),
    _sweep_picture("live-sweep-waves-0.5.16", "4 5", "call5/sweep.jsonl.gz"),
    _sweep_picture("live-sweep-spread-0.5.16", "6 7", "call7/sweep.jsonl.gz"),
    _sweep_picture("live-sweep-0.5.16", "8 9", "call9/sweep.jsonl.gz"),
    _sweep_picture("live-sweep-rounds-0.5.16", "10 11 12", "call12/sweep.jsonl.gz"),
    _sweep_picture("live-sweep-turns-0.5.16", "13 14 15", "call15/sweep.jsonl.gz"),
    _sweep_picture("live-sweep-call21-0.5.16", "21", "call21/sweep.jsonl.gz"),
    _sweep_picture(
        "live-sweep-call2425-0.5.16", "24 25", "call25/sweep.jsonl.gz", extra="--pool-replicas "
    ),
)


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def wrap_command(command: str, width: int = 88) -> list[str]:
    """``command`` in lines of at most ``width`` characters, broken before options.

    >>> wrap_command("sgtrace callgraph --source s --focus f --depth 1", width=30)
    ['sgtrace callgraph --source s', '    --focus f --depth 1']
    """
    parts = command.split(" --")
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 3 + len(part) > width:
            lines.append("    --" + part)
        else:
            lines[-1] += " --" + part
    return lines


def caption_dot(dot: str, picture: Picture) -> str:
    """Replace the graph's label (the source tree) with the release, title and command."""
    lines = dot.splitlines()
    first_cluster = next(
        (i for i, line in enumerate(lines) if line.startswith("subgraph ")), len(lines)
    )
    label = next((i for i in range(first_cluster) if lines[i].startswith("label=")), None)
    if label is None:
        raise DocsBuildError(f"{picture.name}: the DOT from sgtrace has no graph label to caption")
    caption = [f"{picture.release}: {picture.title}", *wrap_command(picture.command)]
    lines[label] = 'label="' + "".join(_dot_escape(line) + "\\l" for line in caption) + '";'
    header = f"// {picture.release}: made by docs/build.py with: {picture.command}"
    return "\n".join([header, *lines]) + "\n"


def picture_dot(picture: Picture) -> str:
    """The captioned DOT of ``picture``, produced by the sgtrace command now."""
    return caption_dot(run_sgtrace(picture.argv), picture)


def svg_from_dot(dot: str) -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise DocsBuildError("Graphviz's dot is not on PATH (apt-get install graphviz)")
    proc = subprocess.run([exe, "-Tsvg"], input=dot, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise DocsBuildError(f"Graphviz failed: {proc.stderr.strip()[:500]}")
    return proc.stdout
