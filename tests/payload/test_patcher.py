"""Every patch the payload applies can be undone: the undo registry and the import patcher."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from sgtrace.payload.patcher import ORIGINAL_ATTR, ImportPatcher, Patches


def owner_class() -> type:
    """A fresh class per test, so that one failing test leaves the others' classes alone."""

    class Owner:
        def method(self) -> str:
            return "original"

    return Owner


def test_undo_puts_back_class_instance_and_namespace_entries_latest_first() -> None:
    Owner = owner_class()
    owner, namespace = Owner(), {"f": len}
    patches = Patches()
    original = patches.set_attr(Owner, "method", lambda self: "class patch")
    assert original(owner) == "original"
    patches.set_attr(owner, "method", lambda: "instance patch")
    assert patches.set_item(namespace, "f", abs) is len
    patches.set_item(namespace, "f", max)
    assert (owner.method(), Owner().method(), namespace["f"], len(patches)) == (
        "instance patch",
        "class patch",
        max,
        4,
    )
    patches.undo()
    assert (owner.method(), "method" in vars(owner), namespace, len(patches)) == (
        "original",
        False,
        {"f": len},
        0,
    )


def test_restore_undoes_one_entry_and_leaves_the_others() -> None:
    first, second = {"a": 1, "b": 2}, owner_class()()
    patches = Patches()
    patches.set_item(first, "a", 10)
    patches.set_attr(second, "method", lambda: "patched")
    patches.restore(first, "a")
    assert (first, second.method()) == ({"a": 1, "b": 2}, "patched")
    patches.undo()
    assert second.method() == "original"


def test_wrap_marks_the_wrapper_and_never_wraps_twice() -> None:
    Owner = owner_class()
    patches = Patches()

    def shout(original):  # noqa: ANN001, ANN202
        return lambda self: original(self).upper()

    assert patches.wrap(Owner, "method", shout)
    assert patches.wrap(Owner, "method", shout)  # already wrapped: done, not doubled
    assert (Owner().method(), getattr(Owner.method, ORIGINAL_ATTR).__name__) == (
        "ORIGINAL",
        "method",
    )
    assert not patches.wrap(Owner, "Missing.method", shout)
    patches.undo()
    assert Owner().method() == "original" and not hasattr(Owner.method, ORIGINAL_ATTR)


def test_a_module_imported_later_is_patched_then_stop_undoes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "late_module.py").write_text("def answer():\n    return 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "late_module", raising=False)
    patcher = ImportPatcher()
    seen: list[types.ModuleType] = []

    def on_import(module: types.ModuleType) -> None:
        seen.append(module)
        patcher.patches.wrap(module, "answer", lambda f: lambda: f() + 1)

    patcher.watch("late_module", on_import)
    patcher.start()
    import late_module  # noqa: PLC0415

    assert (late_module.answer(), seen, patcher.is_started) == (42, [late_module], True)
    assert late_module.__loader__.__class__.__name__ == "SourceFileLoader"
    patcher.stop()
    assert (late_module.answer(), patcher.is_started) == (41, False)
    assert not [f for f in sys.meta_path if "PostImport" in type(f).__name__]
