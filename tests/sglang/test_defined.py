"""The map's ``ast`` oracle (:mod:`sgtrace.sglang.defined`) on a small source of our own: a
class-body field (:attr:`HomeKind.FIELD`, as ``ServerArgs``' dataclass fields) against the
other kinds of definition it must not be taken for."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgtrace.sglang.defined import defines, missing
from sgtrace.sglang.runtime_names import Home, HomeKind, RuntimeName

SOURCE = '''"""Config records, shaped like SGLang's server args."""

import dataclasses

LIMIT = 4


@dataclasses.dataclass
class Args:
    annotated_only: int
    enabled: bool = False
    PLAIN = "a class attribute"

    class Nested:
        inner: int = 0

    def method(self):
        self.assigned = True
        return self.enabled

    @property
    def derived(self) -> bool:
        return True


class Other:
    elsewhere: bool = True
'''


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "args.py").write_text(SOURCE, "utf-8")
    return tmp_path


def field(name: str, cls: str = "Args", module: str = "pkg.args") -> RuntimeName:
    return RuntimeName(name, name, Home(HomeKind.FIELD, (module,), cls))


@pytest.mark.parametrize(
    ("name", "is_field"),
    [
        ("annotated_only", True),  # ``x: int``
        ("enabled", True),  # ``x: bool = False``, a dataclass field with a default
        ("PLAIN", True),  # ``X = ...``
        ("method", False),  # a method is not a field
        ("derived", False),  # nor a property
        ("assigned", False),  # ``self.x = ...`` (an ATTRIBUTE) is not in the class body
        ("Nested", False),  # a nested class
        ("inner", False),  # a field of the nested class
        ("elsewhere", False),  # a field of another class
        ("LIMIT", False),  # a module global
    ],
)
def test_a_field_is_a_name_assigned_or_annotated_in_the_class_body(
    root: Path, name: str, is_field: bool
) -> None:
    assert defines(root, field(name)) is is_field


def test_a_field_needs_its_class_and_module(root: Path) -> None:
    assert defines(root, field("elsewhere", cls="Other"))
    assert defines(root, field("inner", cls="Args.Nested"))
    assert missing(
        root, [field("enabled", cls="Missing"), field("enabled", module="pkg.gone")]
    ) == (
        "enabled",
        "enabled",
    )


def test_an_attribute_home_still_takes_self_assignments_a_field_home_does_not(root: Path) -> None:
    attribute = RuntimeName("a", "assigned", Home(HomeKind.ATTRIBUTE, ("pkg.args",), "Args"))
    assert (defines(root, attribute), defines(root, field("assigned"))) == (True, False)


def test_the_first_home_module_that_defines_the_field_counts(root: Path) -> None:
    entry = RuntimeName("f", "enabled", Home(HomeKind.FIELD, ("pkg.gone", "pkg.args"), "Args"))
    assert defines(root, entry)
