"""What an oracle answers for a file (its callees per call line), jedi's answers, and the cache.

An oracle is asked once per (release, file, oracle version); its answers are kept as JSON under
``~/.cache/sgtrace/oracle``, because asking takes minutes and sgtrace a second.

    callees = cached_oracle("jedi", "0.20.0", "sglang==0.5.9", "sglang/srt/x.py",
                            lambda: ask_jedi(root, "sglang/srt/x.py"))
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sgtrace.graphs.source import default_cache_dir


@dataclass(frozen=True)
class OracleCallee:
    """One callee an oracle names for the call at ``line``: ``module:Qual.name`` and its kind."""

    line: int
    name: str
    is_class: bool


def call_positions(source: str) -> Iterator[tuple[int, int]]:
    """(line, column) of the last name of every call's callee (``b`` of ``a.b(...)``); the
    column counts UTF-8 bytes, as ``ast`` does."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            yield func.lineno, func.col_offset
        elif isinstance(func, ast.Attribute) and func.end_lineno is not None:
            yield func.end_lineno, func.end_col_offset - len(func.attr)  # type: ignore[operator]


def cached_oracle(
    oracle: str, version: str, release: str, file: str, ask: Callable[[], list[OracleCallee]]
) -> list[OracleCallee]:
    """``ask()``'s answer for ``file``, from the cache when asked before. jedi's entries keep
    their first name (no oracle in it) so that caches written before stay valid."""
    stem = f"{release}-{version}" if oracle == "jedi" else f"{release}-{oracle}-{version}"
    cache = default_cache_dir() / "oracle" / f"{stem}-{file.replace('/', '_')}.json"
    if cache.is_file():
        return [OracleCallee(**row) for row in json.loads(cache.read_text(encoding="utf-8"))]
    callees = ask()
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps([c.__dict__ for c in callees]), encoding="utf-8")
    return callees


def jedi_version() -> str:
    import jedi

    return str(jedi.__version__)


def ask_jedi(root: Path, file: str) -> list[OracleCallee]:
    """The callees jedi finds inside ``root`` for every call of ``file``:
    ``Script.goto(follow_imports=True)`` on the last name of the callee."""
    import jedi

    project = jedi.Project(path=root, added_sys_path=[str(root)], smart_sys_path=False)
    path = root / file
    source = path.read_text(encoding="utf-8")
    script = jedi.Script(source, path=path, project=project)
    found: set[OracleCallee] = set()
    for line, column in call_positions(source):
        try:
            names = script.goto(line, column, follow_imports=True)
        except (ValueError, RecursionError, AttributeError):  # jedi's own failures on odd code
            continue
        for name in names:
            where = name.module_path
            if name.type not in ("function", "class") or where is None:
                continue
            if not Path(where).resolve().is_relative_to(root.resolve()):
                continue
            module = name.module_name
            full = name.full_name or ""
            if not full.startswith(module + "."):
                continue
            found.add(
                OracleCallee(line, f"{module}:{full[len(module) + 1 :]}", name.type == "class")
            )
    return sorted(found, key=lambda c: (c.line, c.name))
