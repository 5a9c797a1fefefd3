"""The cheap index pass (stdlib ``ast``) and the libcst passes agree on every definition."""

from __future__ import annotations

import dataclasses

import pytest

from sgtrace.graphs.collect import collect_module
from sgtrace.graphs.outline import outline_module
from sgtrace.graphs.summary import ModuleSummary

PACKAGES = ("sglang/srt/managers/", "sglang/srt/speculative/")


def definitions(summary: ModuleSummary) -> tuple:
    """Everything but call sites, which only the libcst passes collect."""
    functions = {q: dataclasses.replace(f, calls=()) for q, f in summary.functions.items()}
    classes = {q: dataclasses.replace(c, calls=()) for q, c in summary.classes.items()}
    return summary.imports, summary.names, functions, classes


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_outline_equals_libcst_definitions_on_a_release(sglang_source, version: str) -> None:
    tree = sglang_source(version)
    files = sorted(
        p
        for p in tree.root.glob("sglang/srt/**/*.py")
        if p.relative_to(tree.root).as_posix().startswith(PACKAGES)
    )
    assert len(files) > 40
    differ = []
    for path in files:
        rel = path.relative_to(tree.root).as_posix()
        source = path.read_bytes().decode("utf-8-sig")
        full = collect_module(source, "m", rel, False)
        outline = outline_module(source, "m", rel, False)
        if outline is None or definitions(outline) != definitions(full):
            differ.append(rel)
    assert differ == []


def test_outline_equals_libcst_definitions_on_own_program() -> None:
    source = """\
import os.path as osp
from .base import Base
if True:
    from typing import TYPE_CHECKING


class Worker(Base):
    size: "int"

    def __init__(self, engine: "Engine", depth: int = 2) -> None:
        from .engines import Engine
        self.engine = engine
        self.helper = Engine() if depth else None

    @property
    def current(self) -> "Engine":
        return self.engine

    @abstractmethod
    def step(self): ...

    def run(self):
        def inner():
            return osp.join("a", "b")
        return inner
"""
    full = collect_module(source, "pkg.mod", "pkg/mod.py", False)
    assert definitions(outline_module(source, "pkg.mod", "pkg/mod.py", False)) == definitions(full)
