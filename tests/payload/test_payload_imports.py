"""The payload runs where sgtrace is not installed: stdlib only, relative imports, no switches
read from the environment (the import contract in pyproject.toml says the same for sgtrace's
own packages and its dependencies)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import sgtrace.payload
from sgtrace.bootstrap import PAYLOAD_PACKAGE, payload_files

PACKAGE = Path(sgtrace.payload.__file__).parent
MODULES = sorted(path.stem for path in PACKAGE.glob("*.py"))
SUBMODULES = [name for name in MODULES if name != "__init__"]


def imports_of(path: Path) -> list[tuple[int, str]]:
    """``(level, module)`` of every import in ``path``; ``from . import x`` gives ``(1, "x")``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((0, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level and node.module is None:
            found.extend((node.level, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


def test_every_absolute_import_is_of_the_standard_library() -> None:
    outside = {
        f"{path.name}: {module}"
        for path in PACKAGE.glob("*.py")
        for level, module in imports_of(path)
        if level == 0 and module.split(".")[0] not in sys.stdlib_module_names | {"__future__"}
    }
    assert outside == set()


def test_every_relative_import_is_a_module_of_the_payload() -> None:
    relative = {
        (path.stem, module.split(".")[0])
        for path in PACKAGE.glob("*.py")
        for level, module in imports_of(path)
        if level
    }
    assert relative, "the payload's modules import each other relatively"
    assert {(where, module) for where, module in relative if module not in MODULES} == set()
    assert all(level in (0, 1) for path in PACKAGE.glob("*.py") for level, _ in imports_of(path))


def test_no_environment_variable_is_read() -> None:
    """Behaviour switches are fields of the hook's config, never environment variables."""
    reads = [
        f"{path.name}:{node.lineno}"
        for path in PACKAGE.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"))
        or (isinstance(node, ast.Name) and node.id in ("environ", "getenv"))
    ]
    assert reads == []


def test_the_copied_package_imports_in_an_isolated_python(tmp_path: Path) -> None:
    """Each module, copied as the bootstrap directory holds it, in ``python -I -S`` (no site
    packages: no sgtrace, no dependencies)."""
    for name, text in payload_files().items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    assert sorted(p.stem for p in (tmp_path / PAYLOAD_PACKAGE).glob("*.py")) == MODULES
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import importlib\n"
        f"for name in {SUBMODULES!r}: importlib.import_module('{PAYLOAD_PACKAGE}.' + name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('sgtrace')))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    expected = [PAYLOAD_PACKAGE] + [f"{PAYLOAD_PACKAGE}.{name}" for name in SUBMODULES]
    assert done.stdout.split("'")[1::2] == sorted(expected)
