"""The SGLang releases the map is checked on, and an ``ast`` oracle for names defined in them."""

from __future__ import annotations

import ast
from pathlib import Path

from sgtrace.names import QualName
from sgtrace.sglang.runtime_names import HomeKind, RuntimeName

RELEASES = (
    "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1", "0.5.13",
    "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19",
    "0.5.20", "0.5.21", "0.5.22", "0.5.23",
)  # fmt: skip


def defined_in_source(root: Path, name: QualName) -> bool:
    """Whether ``name`` is defined in its module file, checked with ``ast`` (not the engine)."""
    path = root / (name.module.replace(".", "/") + ".py")
    if not path.is_file():
        return False
    body = ast.parse(path.read_text("utf-8")).body
    for part in name.qualname.split("."):
        found = [
            node
            for node in body
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name == part
        ]
        if not found:
            return False
        body = found[-1].body
    return True


def _module_body(root: Path, module: str) -> list[ast.stmt] | None:
    path = root / (module.replace(".", "/") + ".py")
    return ast.parse(path.read_text("utf-8")).body if path.is_file() else None


def _bound_at_top(body: list[ast.stmt]) -> set[str]:
    """Names a module or class body binds: imports, definitions, assignments."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _self_attributes(cls: ast.ClassDef) -> set[str]:
    """``self.X`` assigned anywhere in the class, and names its body binds."""
    assigned = {
        target.attr
        for node in ast.walk(cls)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }
    return assigned | _bound_at_top(cls.body)


def defines_runtime_name(root: Path, entry: RuntimeName) -> bool:
    """Whether the release at ``root`` defines ``entry`` in one of its home modules (``ast``)."""
    home = entry.home
    for module in home.modules:
        body = _module_body(root, module)
        if body is None:
            continue
        if home.kind is HomeKind.MODULE:
            return True
        if home.kind is HomeKind.BINDING:
            if entry.name in _bound_at_top(body):
                return True
            continue
        classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == home.cls]
        if not classes:
            continue
        cls = classes[-1]
        if home.kind is HomeKind.METHOD:
            methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
            if entry.name in methods:
                return True
        elif entry.name in _self_attributes(cls):
            return True
    return False


def scheduler_attributes(root: Path) -> set[str]:
    """The ``self.X`` SGLang's ``Scheduler`` or one of its bases in its module assigns."""
    body = _module_body(root, "sglang.srt.managers.scheduler") or []
    classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == "Scheduler"]
    return set().union(*(_self_attributes(cls) for cls in classes))
