"""Whether a release defines a runtime name where the map says, read with ``ast`` (the payload
looks these names up in running SGLang processes; a name the release lacks would fail there).

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "m.py").write_text(
...     "class C:\\n    on: bool = False\\n    def f(self, flag=False):\\n        self.x = 1\\n")
>>> from sgtrace.sglang.runtime_names import Home, HomeKind, RuntimeName
>>> [defines(root, RuntimeName("f", n, Home(k, ("m",), c))) for n, k, c in [
...     ("C.f", HomeKind.METHOD, "C"), ("x", HomeKind.ATTRIBUTE, "C"),
...     ("flag", HomeKind.PARAMETER, "C.f"), ("other", HomeKind.PARAMETER, "C.f"),
...     ("on", HomeKind.FIELD, "C"), ("x", HomeKind.FIELD, "C")]]
[True, True, True, False, True, False]
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from sgtrace.sglang.runtime_names import HomeKind, RuntimeName

_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def module_body(root: Path, module: str) -> list[ast.stmt] | None:
    """The top-level statements of ``module`` under ``root``, None where it has no file."""
    path = root / (module.replace(".", "/") + ".py")
    if not path.is_file():
        path = root / module.replace(".", "/") / "__init__.py"
    return ast.parse(path.read_text("utf-8")).body if path.is_file() else None


def bound_at_top(body: list[ast.stmt]) -> set[str]:
    """Names a module or class body binds: imports, definitions, assignments."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, _Def):
            names.add(node.name)
    return names | assigned_at_top(body)


def assigned_at_top(body: list[ast.stmt]) -> set[str]:
    """Names assigned or annotated in a module or class body itself (``x = 1``, ``x: int``,
    ``x: int = 1``); in a class body, a dataclass's or struct's fields and class attributes."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def self_attributes(cls: ast.ClassDef) -> set[str]:
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
    return assigned | bound_at_top(cls.body)


def _find(body: list[ast.stmt], qualname: str) -> _Def | None:
    found: _Def | None = None
    for part in qualname.split("."):
        matches = [n for n in body if isinstance(n, _Def) and n.name == part]
        if not matches:
            return None
        found = matches[-1]
        body = found.body
    return found


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = function.args
    every = args.posonlyargs + args.args + args.kwonlyargs
    return {a.arg for a in every}


def defines(root: Path, entry: RuntimeName) -> bool:
    """Whether the release at ``root`` defines ``entry`` in one of its home modules."""
    for module in entry.home.modules:
        body = module_body(root, module)
        if body is not None and _defined_in(body, entry):
            return True
        if body is not None and entry.home.kind is HomeKind.MODULE:
            return True
    return False


def _defined_in(body: list[ast.stmt], entry: RuntimeName) -> bool:
    home = entry.home
    if home.kind is HomeKind.MODULE:
        return True
    if home.kind is HomeKind.BINDING:
        return entry.name in bound_at_top(body)
    owner = _find(body, home.cls or "")
    if home.kind is HomeKind.PARAMETER:
        functions = ast.FunctionDef | ast.AsyncFunctionDef
        return isinstance(owner, functions) and entry.name in _parameters(owner)
    if not isinstance(owner, ast.ClassDef):
        return False
    if home.kind is HomeKind.METHOD:
        method = entry.name.rpartition(".")[2]  # a method, or Class.method of that class
        return isinstance(_find(owner.body, method), ast.FunctionDef | ast.AsyncFunctionDef)
    if home.kind is HomeKind.FIELD:
        return entry.name in assigned_at_top(owner.body)  # not methods, not ``self.x``
    return entry.name in self_attributes(owner)


def missing(root: Path, entries: Iterable[RuntimeName]) -> tuple[str, ...]:
    """The fields of ``entries`` the release at ``root`` does not define, in order."""
    return tuple(entry.field for entry in entries if not defines(root, entry))
