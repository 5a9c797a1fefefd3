"""The SGLang releases the map is checked on, and an ``ast`` oracle for names defined in them."""

from __future__ import annotations

import ast
from pathlib import Path

from sgtrace.names import QualName
from sgtrace.sglang.defined import defines, module_body, self_attributes

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


defines_runtime_name = defines  # the map's own ast oracle (sgtrace.sglang.defined)


def scheduler_attributes(root: Path) -> set[str]:
    """The ``self.X`` SGLang's ``Scheduler`` or one of its bases in its module assigns."""
    body = module_body(root, "sglang.srt.managers.scheduler") or []
    classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == "Scheduler"]
    return set().union(*(self_attributes(cls) for cls in classes))
