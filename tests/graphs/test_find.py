"""``find``: definitions of a name and every call site resolving to them (library level)."""

from __future__ import annotations

import pytest

from sgtrace.errors import UnknownNameError
from sgtrace.graphs.find import Definition, FindResult, find_name
from sgtrace.graphs.model import CallSite
from sgtrace.names import QualName
from tests.graphs.golden import CASES_DIR, Case


def case_find(case: str, name: str) -> FindResult:
    return find_name(Case(CASES_DIR / case).project(), name)


def q(text: str) -> QualName:
    return QualName.parse(text)


def test_find_abstract_method_lists_overriders_and_their_call_site() -> None:
    step, text = q("app.base:Backend.step"), "return self.execute()"
    assert case_find("abstract_method_overriders", "execute") == FindResult(
        (
            Definition("app/base.py", 10, q("app.base:Backend.execute"), "method"),
            Definition("app/cpu.py", 5, q("app.cpu:CpuBackend.execute"), "method"),
            Definition("app/cpu.py", 10, q("app.cpu:PinnedCpuBackend.execute"), "method"),
            Definition("app/cuda.py", 5, q("app.cuda:CudaBackend.execute"), "method"),
        ),
        (
            CallSite("app/base.py", 7, step, q("app.base:Backend.execute"), text, None, "mro"),
            CallSite(
                "app/base.py", 7, step, q("app.cpu:CpuBackend.execute"), text, None, "override"
            ),
            CallSite(
                "app/base.py",
                7,
                step,
                q("app.cpu:PinnedCpuBackend.execute"),
                text,
                None,
                "override",
            ),
            CallSite(
                "app/base.py", 7, step, q("app.cuda:CudaBackend.execute"), text, None, "override"
            ),
        ),
    )


def test_find_class_method_name_and_qualified_name_agree() -> None:
    by_method = case_find("method_via_mro", "Right.describe")
    assert by_method == case_find("method_via_mro", "app.right:Right.describe")
    assert by_method == FindResult(
        (Definition("app/right.py", 8, q("app.right:Right.describe"), "method"),),
        (
            CallSite(
                "app/leaf.py",
                11,
                q("app.leaf:Leaf.describe"),
                q("app.right:Right.describe"),
                "return super().describe()",
                None,
                "super",
            ),
        ),
    )


def test_find_class_without_init_finds_instantiations() -> None:
    assert case_find("attr_from_constructor", "Engine") == FindResult(
        (Definition("app/parts.py", 1, q("app.parts:Engine"), "class"),),
        (
            CallSite(
                "app/car.py",
                6,
                q("app.car:Car.__init__"),
                q("app.parts:Engine"),
                "self.engine = Engine()",
                None,
                "import",
            ),
        ),
    )


def test_find_class_with_init_finds_constructor_calls() -> None:
    result = case_find("class_call_links_init", "Own")
    assert result == FindResult(
        (Definition("app/models.py", 8, q("app.models:Own"), "class"),),
        (
            CallSite(
                "app/main.py",
                7,
                q("app.main:build"),
                q("app.models:Own.__init__"),
                "Own()",
                None,
                "import",
            ),
        ),
    )


def test_find_class_instantiated_through_a_factory() -> None:
    result = case_find("factory_returns_classes", "EagleWorker")
    assert [(s.file, s.line, s.how) for s in result.call_sites] == [("app/server.py", 6, "factory")]


def test_find_unknown_name_suggests_close_names() -> None:
    with pytest.raises(UnknownNameError) as excinfo:
        case_find("method_via_mro", "describ")
    assert str(excinfo.value) == (
        "no function or class named 'describ' in cases/method_via_mro/input; did you mean describe?"
    )
