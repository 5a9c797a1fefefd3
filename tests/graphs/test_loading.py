"""Loading summaries: the parallel batch, the cache its workers write, and what is parsed how.

A program of many modules goes through the process pool (``PARALLEL_MIN_FILES`` or more files);
its summaries must equal those made one by one in this process, and must come back equal
from the cache entries the pool's workers wrote.
"""

from __future__ import annotations

import gc
from pathlib import Path

from sgtrace.graphs.build import Project, build_call_graph
from sgtrace.graphs.index import PARALLEL_MIN_FILES, paused_gc
from sgtrace.graphs.source import open_source

MODULES = PARALLEL_MIN_FILES + 4


def write_program(root: Path) -> list[str]:
    """``app.m0`` ... ``app.mN`` calling each other, plus ``lib.base`` that they all import."""
    (root / "app").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "app" / "__init__.py").write_text("")
    (root / "lib" / "__init__.py").write_text("")
    (root / "lib" / "base.py").write_text("class Base:\n    def run(self):\n        pass\n")
    names = []
    for n in range(MODULES):
        nxt = (n + 1) % MODULES
        (root / "app" / f"m{n}.py").write_text(
            "from lib.base import Base\n"
            f"from app.m{nxt} import f{nxt}\n\n\n"
            f"class C{n}(Base):\n    def go(self):\n        self.run()\n        f{nxt}()\n\n\n"
            f"def f{n}():\n    C{n}().go()\n"
        )
        names.append(f"app.m{n}")
    return names


def test_many_targets_are_parsed_fully_in_one_batch_without_outlines(tmp_path: Path) -> None:
    modules = write_program(tmp_path / "src")
    project = Project(open_source(tmp_path / "src"), tmp_path / "cache")
    project.prefetch_imports(modules)
    loaded = project.index.loaded
    assert sorted(m for m in loaded if not loaded[m].is_outline) == sorted(modules)
    assert [m for m in loaded if loaded[m].is_outline] == ["lib.base"]  # imported, not a target
    entries = [p.name for p in (tmp_path / "cache" / "summaries").rglob("*.sgc")]
    summaries = [e for e in entries if not e.startswith("bases-")]  # a worker scanned the bases
    assert len(summaries) == MODULES + 1  # no outline entry for any target
    assert "class_bases" in vars(project.index)
    bases = project.index.class_bases
    assert list(bases) == ["Base"]
    assert sorted(bases["Base"]) == sorted((m, f"C{n}") for n, m in enumerate(modules))


def test_pool_summaries_equal_in_process_ones_and_their_cache(tmp_path: Path) -> None:
    modules = write_program(tmp_path / "src")
    tree = open_source(tmp_path / "src")
    pooled = Project(tree, tmp_path / "cache")
    pooled.index.jobs = 2
    pooled.index.load(modules)
    alone = Project(tree, use_cache=False)
    alone.index.jobs = 1
    alone.index.load(modules)
    again = Project(tree, tmp_path / "cache")  # reads what the pool's workers wrote
    again.index.load(modules)
    for module in modules:
        assert pooled.index.loaded[module] == alone.index.loaded[module]
        assert again.index.loaded[module] == alone.index.loaded[module]
    graph = build_call_graph(again, ["app"])
    assert ("app.m0:f0", "app.m0:C0.go") in {(str(s.caller), str(s.callee)) for s in graph.sites}


def test_paused_gc_restores_the_collector_and_nests() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still holds it
    assert gc.isenabled()
