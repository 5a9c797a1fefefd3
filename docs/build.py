"""Regenerate what docs/ shows from sgtrace itself: pictures, the CLI reference, excerpts.

Every picture is one ``sgtrace callgraph ... --format dot`` command, run in a subprocess so
that the command written into the picture is exactly the one that made it. The DOT goes to
``docs/img/<name>.dot`` with the release and the command as its caption; Graphviz turns it into
``docs/img/<name>.svg``. A few pictures are *live*: drawn from runs recorded on a GPU server
(``LIVE_PICTURES``: ``sgtrace report`` of a trace for docs/, ``sweep_report.py`` of a recorded
sweep for the lab book, ``bench/results/LABBOOK.md``, whose pictures are in
``bench/results/img``); they cannot be redrawn here, so they are kept as committed, and only
checked to exist, to name their command and to be shown on a page.
``docs/cli.md`` is rendered from the click commands of :mod:`sgtrace.cli`.
The ``console`` blocks of the pages (a ``$ sgtrace ...`` line, then its output) get the output
of running that command now.

    python docs/build.py                      # rewrite docs/img, docs/cli.md, console excerpts
    python docs/build.py --check              # regenerate in memory; exit 1 if anything differs
    python docs/build.py --only decode-loop-0.5.9

``nox -s docs`` runs the first form; ``tests/test_docs.py`` makes the same comparisons as
``--check``. The Graphviz SVG is not compared (Graphviz stamps its version into it): the DOT is.
"""

# No ``from __future__ import annotations``: tests/test_docs.py loads this file with importlib
# without registering it in sys.modules, and dataclasses needs either one to read string
# annotations. Python >= 3.10 evaluates these annotations as they are.

import argparse
import ast
import difflib
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from sgtrace.cli import main as sgtrace_main

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
IMG = DOCS / "img"
LABBOOK = REPO / "bench" / "results" / "LABBOOK.md"  # the history of the experiments
LAB_IMG = LABBOOK.parent / "img"
PAGES_REFRESHED = ("tutorial.md", "limitations.md", "architecture.md")
REGENERATE = "run `nox -s docs` (or `python docs/build.py`) and review the diff"
HELP_WIDTH = 100


class DocsBuildError(RuntimeError):
    """A generator step could not run (sgtrace or Graphviz failed); the message says which."""


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
    _sweep_picture("live-sweep-waves-0.5.16", "4 5", "call5/sweep.jsonl"),
    _sweep_picture("live-sweep-spread-0.5.16", "6 7", "call7/sweep.jsonl"),
    _sweep_picture("live-sweep-0.5.16", "8 9", "call9/sweep.jsonl"),
    _sweep_picture("live-sweep-rounds-0.5.16", "10 11 12", "call12/sweep.jsonl"),
    _sweep_picture("live-sweep-turns-0.5.16", "13 14 15", "call15/sweep.jsonl"),
    _sweep_picture("live-sweep-call21-0.5.16", "21", "call21/sweep.jsonl"),
    _sweep_picture(
        "live-sweep-call2425-0.5.16", "24 25", "call25/sweep.jsonl", extra="--pool-replicas "
    ),
)


@dataclass(frozen=True)
class Mismatch:
    """A generated file that differs from what is committed."""

    path: Path
    committed: str
    generated: str

    def diff(self) -> str:
        rel = self.path.relative_to(REPO).as_posix()
        lines = difflib.unified_diff(
            self.committed.splitlines(keepends=True),
            self.generated.splitlines(keepends=True),
            f"{rel} (committed)",
            f"{rel} (generated now)",
        )
        return "".join(lines)


def sgtrace_executable() -> str:
    """The ``sgtrace`` console script of this Python's environment."""
    beside = Path(sys.executable).with_name("sgtrace")
    found = str(beside) if beside.is_file() else shutil.which("sgtrace")
    if found is None:
        raise DocsBuildError("the sgtrace command is not installed here; run `pip install -e .`")
    return found


def run_sgtrace(argv: Sequence[str]) -> str:
    """stdout of ``sgtrace ARGV`` run from the repository root; an error with stderr if it fails."""
    proc = subprocess.run(
        [sgtrace_executable(), *argv], cwd=REPO, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise DocsBuildError(
            f"`{shlex.join(['sgtrace', *argv])}` exited {proc.returncode}:\n{proc.stderr.strip()}"
        )
    return proc.stdout


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


def _help_block(title: str, command: click.Command, ctx: click.Context) -> list[str]:
    return ["", f"## {title}", "", "```text", command.get_help(ctx).rstrip(), "```"]


def render_cli_reference() -> str:
    """``docs/cli.md``: every command's ``--help``, from the click objects of this build."""
    width = {"terminal_width": HELP_WIDTH, "max_content_width": HELP_WIDTH}
    root = click.Context(
        sgtrace_main, info_name="sgtrace", **width, **sgtrace_main.context_settings
    )
    names = sgtrace_main.list_commands(root)
    out = [
        "# CLI reference",
        "",
        "<!-- Generated by docs/build.py from the click commands of src/sgtrace/cli/. Do not edit:",
        "     run `nox -s docs`. tests/test_docs.py fails when this page is out of date. -->",
        "",
        "Every command prints a short message and exits 2 when it could not run (bad input, missing",
        "source, missing Graphviz) and exits 1 when it ran and found a problem (for example `find`",
        "when nothing has that name). `sgtrace --debug COMMAND ...` shows the traceback instead.",
        "",
        "| Command | What it does |",
        "| --- | --- |",
    ]
    for name in names:
        summary = sgtrace_main.get_command(root, name).get_short_help_str(limit=120)
        out.append(f"| [`sgtrace {name}`](#sgtrace-{name}) | {summary} |")
    out += _help_block("sgtrace", sgtrace_main, root)
    for name in names:
        command = sgtrace_main.get_command(root, name)
        out += _help_block(
            f"sgtrace {name}", command, click.Context(command, info_name=name, parent=root, **width)
        )
    return "\n".join(out) + "\n"


CONSOLE_BLOCK = re.compile(
    r"(?P<head>```console\n\$ (?P<command>sgtrace [^\n]*)\n)(?P<output>.*?)(?P<tail>```)", re.S
)


def console_commands(page: str) -> list[str]:
    """The ``$ sgtrace ...`` commands of the ``console`` blocks of a page."""
    return [m["command"] for m in CONSOLE_BLOCK.finditer(page)]


def refresh_excerpts(page: str) -> str:
    """``page`` with the output under each ``$ sgtrace ...`` line replaced by the current one."""

    def rerun(match: re.Match[str]) -> str:
        argv = shlex.split(match["command"])[1:]
        return match["head"] + run_sgtrace(argv) + match["tail"]

    return CONSOLE_BLOCK.sub(rerun, page)


MODULES_REGION = re.compile(r"(<!-- modules:start[^\n]*-->\n)(.*?)(<!-- modules:end -->)", re.S)
RST_ROLE = re.compile(r":\w+:`~?([^`]+)`")


def module_summary(path: Path) -> str:
    """The first paragraph of a module's docstring, on one line, as Markdown (parsed, not imported)."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(docstring.split("\n\n")[0].split())
    return RST_ROLE.sub(r"`\1`", first).replace("``", "`")


def render_module_table(src: Path = REPO / "src") -> str:
    """A Markdown table: every module of the sgtrace package and what its docstring says."""
    rows = ["| Module | What it holds |", "| --- | --- |"]
    for path in sorted((src / "sgtrace").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        parts = path.relative_to(src).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        rows.append(f"| [`{module}`](../{rel}) | {module_summary(path).replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"


def refresh_page(page: str) -> str:
    """``page`` with its generated regions (console excerpts, the module table) made current."""
    page = refresh_excerpts(page)
    return MODULES_REGION.sub(lambda m: m[1] + render_module_table() + m[3], page)


def generated_files(only: str | None = None) -> dict[Path, str]:
    """Path -> text of every generated file except SVGs, built now."""
    files: dict[Path, str] = {}
    for picture in PICTURES:
        if only in (None, picture.name):
            files[IMG / f"{picture.name}.dot"] = picture_dot(picture)
    if only in (None, "cli"):
        files[DOCS / "cli.md"] = render_cli_reference()
    for page in PAGES_REFRESHED:
        if only in (None, page):
            files[DOCS / page] = refresh_page((DOCS / page).read_text(encoding="utf-8"))
    return files


def mismatches(files: dict[Path, str]) -> list[Mismatch]:
    """The generated files that differ from the committed ones (a missing file counts as empty)."""
    committed = {path: path.read_text(encoding="utf-8") if path.is_file() else "" for path in files}
    return [Mismatch(p, committed[p], text) for p, text in files.items() if committed[p] != text]


def write(files: dict[Path, str]) -> None:
    """Write what changed; an SVG only when its DOT changed or it is missing (no Graphviz churn)."""
    IMG.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        svg = path.with_suffix(".svg")
        is_changed = not path.is_file() or path.read_text(encoding="utf-8") != text
        if is_changed:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)
        if path.suffix == ".dot" and (is_changed or not svg.is_file()):
            svg.write_text(svg_from_dot(text), encoding="utf-8")
            print(f"wrote {svg.relative_to(REPO)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    parser.add_argument(
        "--only", metavar="NAME", help="one picture name, 'cli', or a page such as tutorial.md"
    )
    args = parser.parse_args(argv)
    try:
        files = generated_files(args.only)
        if not args.check:
            write(files)
            return 0
        found = mismatches(files)
    except DocsBuildError as exc:
        print(f"docs/build.py: {exc}", file=sys.stderr)
        return 2
    for mismatch in found:
        print(mismatch.diff(), file=sys.stderr)
    if found:
        names = ", ".join(m.path.relative_to(REPO).as_posix() for m in found)
        print(f"out of date: {names}; {REGENERATE}", file=sys.stderr)
        return 1
    print("docs are up to date", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
