"""The call-graph result cache: reused while no file changes, rebuilt when one does."""

from __future__ import annotations

import os
from pathlib import Path

from sgtrace.graphs.build import Project, build_call_graph, cached_call_graph, cached_rendering
from sgtrace.graphs.source import open_source


def write_program(root: Path, body: str) -> None:
    (root / "app").mkdir(parents=True, exist_ok=True)
    (root / "app" / "__init__.py").write_text("", encoding="utf-8")
    (root / "app" / "main.py").write_text(body, encoding="utf-8")


def edges(graph) -> list[tuple[str, str]]:
    return sorted((str(s.caller), str(s.callee)) for s in graph.sites)


def test_cached_graph_equals_built_graph_and_follows_edits(tmp_path: Path) -> None:
    src, cache = tmp_path / "src", tmp_path / "cache"
    write_program(src, "def a():\n    b()\n\n\ndef b():\n    pass\n")
    first = cached_call_graph(Project(open_source(src), cache), ["app.main"])
    again = cached_call_graph(Project(open_source(src), cache), ["app.main"])
    fresh = build_call_graph(Project(open_source(src), use_cache=False), ["app.main"])
    assert edges(first) == edges(again) == edges(fresh) == [("app.main:a", "app.main:b")]

    write_program(src, "def a():\n    c()\n\n\ndef c():\n    pass\n")
    path = src / "app" / "main.py"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    edited = cached_call_graph(Project(open_source(src), cache), ["app.main"])
    assert edges(edited) == [("app.main:a", "app.main:c")]


def test_cached_rendering_reads_the_output_back_and_follows_edits(tmp_path: Path) -> None:
    src, cache = tmp_path / "src", tmp_path / "cache"
    write_program(src, "def a():\n    b()\n\n\ndef b():\n    pass\n")
    rendered: list[str] = []

    def render(graph) -> str:
        text = "\n".join(f"{a} -> {b}" for a, b in edges(graph))
        rendered.append(text)
        return text

    first = cached_rendering(Project(open_source(src), cache), render, "edges", ["app.main"])
    again = cached_rendering(Project(open_source(src), cache), render, "edges", ["app.main"])
    assert first == again == "app.main:a -> app.main:b"
    assert len(rendered) == 1  # the second answer came from the cache

    other = cached_rendering(Project(open_source(src), cache), render, "other", ["app.main"])
    assert other == first and len(rendered) == 2  # another form is another entry

    write_program(src, "def a():\n    c()\n\n\ndef c():\n    pass\n")
    path = src / "app" / "main.py"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    edited = cached_rendering(Project(open_source(src), cache), render, "edges", ["app.main"])
    assert edited == "app.main:a -> app.main:c"


def test_cached_rendering_without_a_form_keeps_no_text(tmp_path: Path) -> None:
    src, cache = tmp_path / "src", tmp_path / "cache"
    write_program(src, "def a():\n    b()\n\n\ndef b():\n    pass\n")
    calls: list[int] = []

    def render(graph) -> str:
        calls.append(1)
        return str(len(graph.sites))

    for _ in range(2):
        assert cached_rendering(Project(open_source(src), cache), render, None, ["app.main"]) == "1"
    assert len(calls) == 2


def test_cached_results_are_not_reused_by_another_sgtrace(tmp_path: Path, monkeypatch) -> None:
    """The keys hold a digest of sgtrace's own files: an edited or upgraded sgtrace, which may
    build or render differently, does not read an older one's graph or output back."""
    from sgtrace.graphs import build

    src, cache = tmp_path / "src", tmp_path / "cache"
    write_program(src, "def a():\n    b()\n\n\ndef b():\n    pass\n")
    calls = []

    def render(graph) -> str:
        calls.append(graph)
        return repr(edges(graph))

    cached_rendering(Project(open_source(src), cache), render, "edges", ["app.main"])
    cached_rendering(Project(open_source(src), cache), render, "edges", ["app.main"])
    assert len(calls) == 1
    monkeypatch.setattr(build, "engine_stamp", lambda: "another sgtrace")
    cached_rendering(Project(open_source(src), cache), render, "edges", ["app.main"])
    assert len(calls) == 2
