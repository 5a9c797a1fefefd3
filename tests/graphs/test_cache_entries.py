"""The summary cache is not trusted: damaged, edited, moved or crafted entries are rebuilt.

Each test makes a cache with a real run, tampers with the files in the cache directory as a
disk fault or another user could, and checks that the next run gives exactly what a run
without any cache gives, and that nothing read from the cache ran code.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, make_dataclass
from pathlib import Path

import pytest

from sgtrace.graphs.build import Project, build_call_graph
from sgtrace.graphs.codec import Codec, CodecError, seal, unseal
from sgtrace.graphs.collect import collect_module
from sgtrace.graphs.source import open_source
from sgtrace.graphs.summary import ModuleSummary, ValueKind

PROGRAM = {
    "app/__init__.py": "",
    "app/main.py": (
        "from app.util import helper\n\n\nclass Runner:\n    def go(self):\n"
        "        self.step()\n        helper()\n\n    def step(self):\n        pass\n"
    ),
    "app/util.py": "def helper():\n    return assist()\n\n\ndef assist():\n    pass\n",
}
SRC = Path(__file__).resolve().parents[2] / "src" / "sgtrace"


def write_program(root: Path) -> Path:
    for rel, text in PROGRAM.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def graph_rows(source: Path, cache: Path | None) -> list[tuple[str, str, int, str]]:
    """Every resolved call of the program as (caller, callee, line, how), plus the nodes."""
    project = Project(open_source(source), cache, use_cache=cache is not None)
    graph = build_call_graph(project, ["app"])
    sites = [(str(s.caller), str(s.callee), s.line, s.how) for s in graph.sites]
    nodes = [(str(n), node.kind, node.line, node.file) for n, node in graph.nodes.items()]
    return sorted(sites) + sorted(nodes)  # type: ignore[arg-type]


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file())


@pytest.fixture
def cached(tmp_path: Path) -> tuple[Path, Path, list[tuple[str, str, int, str]]]:
    """A program, a cache filled by one run, and what a run without any cache gives."""
    source, cache = write_program(tmp_path / "src"), tmp_path / "cache"
    expected = graph_rows(source, None)
    assert graph_rows(source, cache) == expected
    assert entries(cache), "the first run cached nothing"
    return source, cache, expected


@pytest.mark.parametrize(
    "damage",
    [
        lambda blob: blob[: len(blob) // 2],
        lambda blob: b"",
        lambda blob: b"\x80\x05garbage",
        lambda blob: blob + b"trailing",
    ],
    ids=["truncated", "empty", "garbage", "trailing-bytes"],
)
def test_damaged_entries_are_rebuilt(cached, damage) -> None:
    source, cache, expected = cached
    for path in entries(cache):
        path.write_bytes(damage(path.read_bytes()))
    assert graph_rows(source, cache) == expected
    assert graph_rows(source, cache) == expected  # the rebuilt entries read back


def test_any_single_flipped_byte_changes_nothing(cached) -> None:
    """Each byte of the largest entry flipped in turn (a digit of a line number among them):
    every run still gives exactly the uncached graph."""
    source, cache, expected = cached
    path = max(entries(cache), key=lambda p: p.stat().st_size)
    original = path.read_bytes()
    differing = []
    for at in range(len(original)):
        flipped = bytearray(original)
        flipped[at] ^= 0x01
        path.write_bytes(bytes(flipped))
        try:
            if graph_rows(source, cache) != expected:
                differing.append(at)
        except Exception as exc:  # noqa: BLE001 - a crash is a failure of this test too
            differing.append(f"{at}: {exc!r}")
        path.write_bytes(original)
    assert differing == [], f"{len(differing)} of {len(original)} flipped bytes were read"


def test_an_entry_moved_under_another_key_is_not_used(cached) -> None:
    source, cache, expected = cached
    files = entries(cache)
    blobs = [p.read_bytes() for p in files]
    for path, blob in zip(
        files, blobs[1:] + blobs[:1], strict=True
    ):  # each file gets its neighbour's bytes
        path.write_bytes(blob)
    assert graph_rows(source, cache) == expected


@dataclass
class _Marker:
    path: str

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (Path(self.path),))


def test_a_crafted_pickle_in_the_cache_runs_nothing(cached, tmp_path: Path) -> None:
    source, cache, expected = cached
    marker = tmp_path / "ran"
    crafted = pickle.dumps(_Marker(str(marker)))
    for path in entries(cache):
        path.write_bytes(crafted)
    assert graph_rows(source, cache) == expected
    assert not marker.exists(), "an entry of the cache ran code"


def test_summaries_of_real_modules_round_trip_through_the_codec() -> None:
    """Every module of sgtrace's own source: encoded and decoded, equal field for field."""
    codec = Codec()
    paths = sorted(p for p in SRC.rglob("*.py") if p.name != "__init__.py")
    assert len(paths) > 40
    for path in paths:
        rel = path.relative_to(SRC.parent).as_posix()
        summary = collect_module(path.read_text(), rel[:-3].replace("/", "."), rel, False)
        assert summary.parse_error is None and (summary.functions or summary.classes), rel
        assert codec.decode(codec.encode(summary, ModuleSummary), ModuleSummary) == summary


def test_a_call_graph_round_trips_through_the_codec() -> None:
    from sgtrace.graphs.model import CallGraph

    project = Project(open_source(SRC.parent), use_cache=False)
    graph = build_call_graph(project, ["sgtrace.graphs.build"])
    assert len(graph.sites) > 50
    codec = Codec()
    again = codec.decode(codec.encode(graph, CallGraph), CallGraph)
    assert again == graph


def test_schema_follows_the_dataclass_fields() -> None:
    """A field added to a dataclass (as value-flow work does) changes the schema digest, so
    entries written before are refused; and a payload with a field too few is an error."""
    old = make_dataclass("Thing", [("name", str)], frozen=True)
    new = make_dataclass("Thing", [("name", str), ("line", int)], frozen=True)
    codec = Codec()
    assert codec.schema(old) != codec.schema(new)
    blob = seal("key", codec.schema(old), codec.encode(old("x"), old))
    with pytest.raises(CodecError):
        unseal(blob, "key", codec.schema(new))
    with pytest.raises(CodecError):
        codec.decode(codec.encode(old("x"), old), new)


@pytest.mark.parametrize(
    ("payload", "hint"),
    [
        (b'["nom","x","",[]]', "ValueExpr"),  # not a ValueKind
        (b'["call",1,"",[]]', "ValueExpr"),  # text must be a string
        (b'["call","x","",[],4]', "ValueExpr"),  # a field too many
        (b'["call","x","",[["nom","y","",[]]]]', "ValueExpr"),  # an operand that is not one
        (b'{"a":1}', "ValueExpr"),
        (b"[" * 100_000, "ValueExpr"),  # nested deeper than the JSON reader goes
        (b'[["x"]]', "tuple[int, ...]"),
        (b"[1.5]", "tuple[int, ...]"),
        (b"[[1,2,3]]", "dict[int, int]"),
    ],
)
def test_malformed_payloads_are_codec_errors(payload: bytes, hint: str) -> None:
    from sgtrace.graphs.summary import ValueExpr

    kinds = {"ValueExpr": ValueExpr, "tuple[int, ...]": tuple[int, ...], "dict[int, int]": dict}
    kinds["dict[int, int]"] = dict[int, int]
    with pytest.raises(CodecError):
        Codec().decode(payload, kinds[hint])
    valid = Codec().decode(b'["call","x","",[["name","y","",[]]]]', ValueExpr)  # well written
    assert valid == ValueExpr(ValueKind.CALL, "x", "", (ValueExpr(ValueKind.NAME, "y", ""),))
