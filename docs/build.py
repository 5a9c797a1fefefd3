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
# annotations. Python >= 3.10 evaluates these annotations as they are. The modules beside it
# (pictures, pages, sgtrace_run) are found as ``python docs/build.py`` finds them: in docs/.

import argparse
import difflib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pages import refresh_page, render_cli_reference
from pictures import IMG, PICTURES, picture_dot, svg_from_dot
from sgtrace_run import DOCS, REPO, DocsBuildError

PAGES_REFRESHED = ("tutorial.md", "limitations.md", "architecture.md")
REGENERATE = "run `nox -s docs` (or `python docs/build.py`) and review the diff"


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
