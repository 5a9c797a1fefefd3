"""The index's textual scans: class statements with their bases, and names after def/class.

The scans search for the keyword and then check that it starts its line's code; they must find
exactly what the ``^``-anchored multi-line patterns they replaced found (kept below as the
reference), including where a keyword sits inside a string or a longer word.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sgtrace.graphs.index import SourceIndex, SummaryCache
from sgtrace.graphs.outline import base_names, scan_class_bases, scan_defined_names
from sgtrace.graphs.source import open_source

_REFERENCE_CLASS = re.compile(rb"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.MULTILINE)
_REFERENCE_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.MULTILINE)


def reference_class_bases(text: bytes) -> list[tuple[str, list[str]]]:
    return [(m.group(1).decode(), base_names(m.group(2))) for m in _REFERENCE_CLASS.finditer(text)]


def reference_defined_names(text: bytes) -> set[str]:
    return {m.group(1).decode() for m in _REFERENCE_DEF.finditer(text)}


SOURCES = {
    "plain": b"class A(B, mod.C, Generic[T]):\n    def f(self): ...\n",
    "nested": b"class A:\n    class B(A):\n        async def g(): ...\n\tclass C(B): pass\n",
    "multi-line bases": b"class A(\n    Base,\n    metaclass=Meta,\n):\n    pass\n",
    "in a string": b"x = 'class Fake(Base)'\ny = '''\nclass Real(Base)'''\nclass Z(Q): ...\n",
    "longer words": b"subclass X(Y)\nmy_def f()\nasync  def  h(): ...\nclassmethod(A)\n",
    "swallowed": b"s = 'class Open(' \nclass Inside(Base):\n    pass\nclass After(X): ...\n",
    "no code": b"",
    "keyword at end": b"class",
    "crlf": b"class A(B):\r\n    def f(self):\r\n        pass\r\n",
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_scans_find_what_the_anchored_patterns_found(name: str) -> None:
    text = SOURCES[name]
    assert scan_class_bases(text) == reference_class_bases(text)
    assert scan_defined_names(text) == reference_defined_names(text)


def test_index_answers_bases_and_names_from_the_scans(tmp_path: Path) -> None:
    package = tmp_path / "src" / "app"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("class Base:\n    def run(self): ...\n")
    (package / "b.py").write_text("from app.a import Base\n\n\nclass Leaf(Base):\n    pass\n")
    cache = tmp_path / "cache"
    for _ in range(2):  # computed, then read back from the cache
        index = SourceIndex(open_source(tmp_path / "src"), SummaryCache(cache))
        assert index.class_bases == {"Base": [("app.b", "Leaf")]}
        assert index.defined_names == {"Base", "Leaf", "run"}


@pytest.mark.network
def test_scans_agree_with_the_anchored_patterns_on_a_release(sglang_source) -> None:
    tree = sglang_source("0.5.9")
    differ = []
    for path in sorted((tree.root / "sglang").rglob("*.py")):
        text = path.read_bytes()
        if scan_class_bases(text) != reference_class_bases(text) or scan_defined_names(
            text
        ) != reference_defined_names(text):
            differ.append(path.relative_to(tree.root).as_posix())
    assert differ == []


def test_base_names_keep_the_last_dotted_part_without_subscripts_or_keywords() -> None:
    assert base_names(b"mod.A, B[T], metaclass=Meta,\n  pkg.sub.C ") == ["A", "B", "C"]
    assert base_names(b"") == []
