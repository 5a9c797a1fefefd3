"""The payload holds no SGLang name of the map: it gets every one through its config.

The payload is copied into SGLang's processes and cannot import the map
(:mod:`sgtrace.sglang.runtime_names`); a name written in it would escape the release walk that
checks the map (tests/sglang/test_map_releases.py). This walks the payload's source with ``ast``
for the map's names where a lookup would spell them: attribute names (``scheduler.tree_cache``)
and string constants (``getattr(scheduler, "tree_cache")``, a module name, or an identifier in
a log message). Docstrings and comments may name SGLang code; free text is matched on
identifier-like words only (with ``_``, ``.`` or an inner capital), so that words such as
"Scheduler" in a message are not taken for the class.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import sgtrace.payload
from sgtrace.sglang.plain_names import PLAIN_NAMES
from sgtrace.sglang.runtime_names import RUNTIME_NAMES

PAYLOAD = Path(sgtrace.payload.__file__).parent
MAP_NAMES = frozenset(entry.name for entry in RUNTIME_NAMES + PLAIN_NAMES)
_WORD = re.compile(r"[A-Za-z_][\w.]*")


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring constants of the module, its classes and functions."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _identifier_like(word: str) -> bool:
    return "_" in word or "." in word or any(c.isupper() for c in word[1:])


def _spelled(text: str) -> set[str]:
    """The map's names a string constant spells: all of it, or identifier-like words in it."""
    if text in MAP_NAMES:
        return {text}
    words = set(_WORD.findall(text))
    words |= {part for word in words for part in word.split(".")}
    return {w for w in words if w in MAP_NAMES and _identifier_like(w)}


def sglang_names_in(source: str, filename: str = "<source>") -> Iterator[str]:
    """``file:line: name`` for every map name spelled in ``source`` outside its docstrings."""
    tree = ast.parse(source, filename)
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in MAP_NAMES:
            yield f"{filename}:{node.lineno}: attribute {node.attr}"
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            for name in sorted(_spelled(node.value)):
                yield f"{filename}:{node.lineno}: string {name!r}"


def test_the_payload_spells_no_name_of_the_map() -> None:
    found = [
        hit
        for path in sorted(PAYLOAD.glob("*.py"))
        for hit in sglang_names_in(path.read_text("utf-8"), path.name)
    ]
    assert found == [], (
        "SGLang names hard-coded in the payload (give them through its config):\n"
        + ("\n".join(found))
    )


@pytest.mark.parametrize(
    ("injected", "name"),
    [
        ('tree = getattr(worker, "tree_cache", None)', "tree_cache"),
        ("runner = target.model_runner", "model_runner"),
        ("backend = runner.attn_backend", "attn_backend"),
        ('namespace.get("release_kv_cache")', "release_kv_cache"),
        ('sys.modules.get("sglang.srt.mem_cache.common")', "sglang.srt.mem_cache.common"),
        ('log.info("built %s", "FutureMap")', "FutureMap"),
        ('log.info("retracted (reset_for_retract, requests)")', "reset_for_retract"),
        ('getattr(kind, "NONE")', "NONE"),
    ],
)
def test_the_walk_catches_a_name_written_into_a_payload_module(injected: str, name: str) -> None:
    """The walk is not vacuous: each payload module, with one hard-coded lookup added, fails."""
    for path in sorted(PAYLOAD.glob("*.py")):
        source = path.read_text("utf-8") + f"\n\ndef injected(worker):\n    {injected}\n"
        hits = list(sglang_names_in(source, path.name))
        assert len(hits) == 1 and hits[0].endswith(repr(name) if "'" in hits[0] else name), hits


def test_docstrings_and_english_words_are_not_lookups() -> None:
    source = '''"""Calls ``release_kv_cache`` and ``FutureMap.__init__``."""

def f(log):
    """Calls ``_add_request_to_queue``."""
    log.info("the Scheduler switched: %s", "as launched")
'''
    assert list(sglang_names_in(source)) == []
    assert "Scheduler" in MAP_NAMES  # the word above is a name of the map, left alone
