"""Selections: the extractors of each role read arguments that the map's functions for that
role really have in real SGLang releases."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

from sgtrace.names import QualName
from sgtrace.payload import record as record_module
from sgtrace.payload.record import DecisionRecord
from sgtrace.sglang import expected_names, family_of_release
from sgtrace.tracer.events import Role
from sgtrace.tracer.selection import (
    DECISION_ARGUMENT,
    HOOK_DECISION,
    RETURN,
    ROLE_FACTS,
    default_selection,
    restrict_selection,
)
from sgtrace.tracer.static import ROLE_OF


def test_restricting_keeps_known_probes_and_adds_others() -> None:
    base = default_selection({Role.VERIFY: [QualName("m", "W.verify")]})
    picked = restrict_selection(base, [QualName("m", "f"), QualName("m", "W.verify")])
    assert [(str(p.function), p.role, len(p.facts)) for p in picked.probes] == [
        ("m:f", Role.OTHER, 0),
        ("m:W.verify", Role.VERIFY, len(ROLE_FACTS[Role.VERIFY])),
    ]


def _function(root: Path, name: QualName) -> ast.FunctionDef:
    path = root / (name.module.replace(".", "/") + ".py")
    assert path.is_file(), f"{name}: no {path}"
    class_name, method = name.qualname.split(".")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    return item
    raise AssertionError(f"{name} is not defined in {path}")


def _parameters(function: ast.FunctionDef) -> set[str]:
    args = function.args
    return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} | {RETURN}


def assert_map_names_fit(root: Path, version: str) -> None:
    for part, names in expected_names(family_of_release(version)).items():
        role = ROLE_OF[part]
        for name in names:
            parameters = _parameters(_function(root, name))
            for spec in ROLE_FACTS[role]:
                heads = {path[0] for path in spec.candidates}
                assert heads & parameters, (
                    f"SGLang {version}: {name} has parameters {sorted(parameters)}; the "
                    f"{spec.fact.value} extractor reads {sorted(heads)}"
                )


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_map_names_fit_the_oldest_and_newest_release(
    sglang_source: Callable[[str], object], version: str
) -> None:
    assert_map_names_fit(sglang_source(version).root, version)  # type: ignore[attr-defined]


@pytest.mark.releases
@pytest.mark.parametrize("version", ["0.5.12.post1", "0.5.13", "0.5.13.post1", "0.5.14", "0.5.16"])
def test_map_names_fit_the_releases_around_the_family_changes(
    sglang_source: Callable[[str], object], version: str
) -> None:
    assert_map_names_fit(sglang_source(version).root, version)  # type: ignore[attr-defined]


def test_the_decision_extractors_read_the_fields_of_the_record_the_hook_hands_over() -> None:
    """HOOK_DECISION names DecisionLog.record, its argument and the DecisionRecord's fields."""
    module, _, qualname = str(HOOK_DECISION).partition(":")
    assert module == f"sgtrace_payload.{record_module.__name__.rsplit('.', 1)[-1]}"
    method = getattr(record_module, qualname.split(".")[0]).record
    assert list(inspect.signature(method).parameters) == ["self", DECISION_ARGUMENT]
    fields = {f.name for f in dataclasses.fields(DecisionRecord)}
    for spec in ROLE_FACTS[Role.DECISION]:
        ((argument, field),) = spec.candidates
        assert argument == DECISION_ARGUMENT and field in fields, spec
