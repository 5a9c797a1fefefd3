"""Result files as the repository stores them: plain, or gzipped under the plain name + ``.gz``.

A device call writes plain files (``sweep.jsonl``, ``greedy.jsonl``, ``run.log``); under
``bench/results/live`` the large ones are kept gzipped (``store_call.sh`` copies a call's
``$OUT`` in and compresses them), so ``call5/greedy.jsonl`` is stored as
``call5/greedy.jsonl.gz``. Readers name the plain file and read either, the same text::

    read_lines(Path("bench/results/live/sweep/call5/greedy.jsonl"))  # reads greedy.jsonl.gz

Standard library only: profile_summary.py imports it on the GPU machine.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TextIO

GZ = ".gz"


def gzipped(path: Path) -> Path:
    """The name ``path`` has once compressed: ``greedy.jsonl`` -> ``greedy.jsonl.gz``."""
    return path.with_name(path.name + GZ)


def stored_path(path: Path) -> Path | None:
    """``path`` if it is a file, else its gzipped name if that is one, else None."""
    return next((p for p in (path, gzipped(path)) if p.is_file()), None)


def is_stored(path: Path) -> bool:
    """Whether ``path`` is there, plain or gzipped."""
    return stored_path(path) is not None


def open_text(path: Path) -> TextIO:
    """``path`` opened as UTF-8 text, or its gzipped name decompressed where ``path`` is missing
    (a name that ends in ``.gz`` is always decompressed).

    Raises FileNotFoundError naming both paths tried when neither is there.
    """
    found = stored_path(path)
    if found is None:
        raise FileNotFoundError(
            f"neither {path} nor {gzipped(path)} exists (a stored result is one or the other)"
        )
    if found.name.endswith(GZ):
        return gzip.open(found, "rt", encoding="utf-8")
    return open(found, encoding="utf-8")


def read_text(path: Path) -> str:
    """The whole text of ``path`` or of its gzipped name (:func:`open_text`)."""
    with open_text(path) as f:
        return f.read()


def read_lines(path: Path) -> list[str]:
    """The lines of ``path`` or of its gzipped name, as ``path.read_text().splitlines()``."""
    return read_text(path).splitlines()
