"""The payload holds no SGLang name of the map: it gets every one through its config.

The payload is copied into SGLang's processes and cannot import the map
(:mod:`sgtrace.sglang.runtime_names`); a name written in it would escape the release walk that
checks the map (tests/sglang/test_map_releases.py). This walks the payload's source with ``ast``
for the map's names where a lookup would spell them: attribute names (``worker._target_worker``)
and string constants (``getattr(worker, "_target_worker")``, a module name, or an identifier in
a log message). Docstrings and comments may name SGLang code; free text is matched on
identifier-like words only (with ``_``, ``.`` or an inner capital), so that English words such
as "verify" in a message are not taken for the method.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import sgtrace.payload
from sgtrace.sglang.runtime_names import RUNTIME_NAMES

PAYLOAD = Path(sgtrace.payload.__file__).parent
MAP_NAMES = frozenset(entry.name for entry in RUNTIME_NAMES)
_WORD = re.compile(r"[A-Za-z_][\w.]*")
# Words of messages that are the map's names but name something else, by file: the hook's
# observe-only message (eligibility.py) quotes the server's draft settings (``num_draft_tokens=4``), not the
# attention backend's attribute of that name.
IN_MESSAGES = {("eligibility.py", "num_draft_tokens")}


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


def _spelled(text: str, filename: str) -> set[str]:
    """The map's names a string constant spells: all of it, or identifier-like words in it."""
    if text in MAP_NAMES:
        return {text}
    words = set(_WORD.findall(text))
    words |= {part for word in words for part in word.split(".")}
    return {
        w
        for w in words
        if w in MAP_NAMES and _identifier_like(w) and (filename, w) not in IN_MESSAGES
    }


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
            for name in sorted(_spelled(node.value, filename)):
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
        ('runner = getattr(worker, "_target_worker", None)', "_target_worker"),
        ("backend = worker._target_worker.model_runner", "_target_worker"),
        ('namespace.get("eagle_sample")', "eagle_sample"),
        (
            'sys.modules.get("sglang.srt.speculative.spec_utils")',
            "sglang.srt.speculative.spec_utils",
        ),
        ('log.info("lean %s", "FutureMap")', "FutureMap"),
        ('log.info("replaced (_resolve_spec_extras, stash)")', "_resolve_spec_extras"),
        ('patches.set_attr(worker, "stash", lean)', "stash"),
    ],
)
def test_the_walk_catches_a_name_written_into_a_payload_module(injected: str, name: str) -> None:
    """The walk is not vacuous: each payload module, with one hard-coded lookup added, fails."""
    for path in sorted(PAYLOAD.glob("*.py")):
        source = path.read_text("utf-8") + f"\n\ndef injected(worker):\n    {injected}\n"
        hits = list(sglang_names_in(source, path.name))
        assert len(hits) == 1 and hits[0].endswith(repr(name) if "'" in hits[0] else name), hits


def test_docstrings_and_english_words_are_not_lookups() -> None:
    source = '''"""Replaces ``eagle_sample`` and ``FutureMap.stash``."""

def f(log):
    """Calls ``_target_worker``."""
    log.info("its one-token verify attention: %s", "as upstream builds it")
'''
    assert list(sglang_names_in(source)) == []
    assert "verify" in MAP_NAMES  # the English word above is a name of the map, left alone
