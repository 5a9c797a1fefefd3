"""File I/O of ``inject-hook``: the runtime directory, the source patch, its backup and revert.

* :func:`generate_runtime_hook` (``--mode runtime``) writes a bootstrap directory: the
  ``sitecustomize`` of :mod:`sgtrace.bootstrap`, the payload package and the hook's config. SGLang's files
  are not touched. A directory that already holds the same files is left alone.
* :func:`patch_source` (``--mode patch``) computes the codemod of :mod:`sgtrace.hooks.inject` and
  returns its unified diff; with ``write`` it keeps each original as ``<file>.sgtrace-orig``
  (byte for byte), records what it did in ``sglang/sgtrace_hook_patch.json`` and replaces the
  files atomically; a second run finds the marker and changes nothing; ``revert`` restores the
  originals byte for byte and deletes what the patch created.

Every file is written through a temporary file in the same folder and :func:`os.replace`, so a
reader never sees half a file.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from sgtrace.bootstrap import MANIFEST, render_boot_files
from sgtrace.errors import SgtraceError
from sgtrace.graphs.source import SourceTree
from sgtrace.hooks.render import (
    DEFAULT_OPTIONS,
    HookOptions,
    PolicyConfigLike,
    boot_plugin,
    hook_files,
)
from sgtrace.hooks.sites import locate_sites
from sgtrace.hooks.spec import HookSpec
from sgtrace.sglang.anchors import DECIDE_GUARD

if TYPE_CHECKING:
    from sgtrace.hooks.inject import Insertion

BACKUP_SUFFIX = ".sgtrace-orig"
PATCH_MANIFEST = "sgtrace_hook_patch.json"


@dataclass(frozen=True)
class Applied:
    """The hook was written; ``files`` (relative to ``root``) were created or changed."""

    root: Path
    files: tuple[str, ...]
    spec: HookSpec


@dataclass(frozen=True)
class AlreadyPresent:
    """The hook was already there, identical; nothing was written."""

    root: Path
    files: tuple[str, ...]
    spec: HookSpec


class PatchStatus(Enum):
    """What :func:`patch_source` did."""

    PLANNED = "planned"  # diff computed, nothing written (no --write)
    APPLIED = "applied"
    ALREADY_PRESENT = "already-present"
    REVERTED = "reverted"
    NOT_PATCHED = "not-patched"  # --revert on a tree without a patch


@dataclass(frozen=True)
class PatchResult:
    """Outcome of :func:`patch_source`: the status, the unified diff, the files involved."""

    status: PatchStatus
    diff: str
    files: tuple[str, ...]
    spec: HookSpec | None


@dataclass(frozen=True)
class FileChange:
    """One file of a patch; ``created`` for the hook's own files (``before`` is ``None`` until
    they exist), else a file of SGLang that the codemod edits."""

    path: str
    before: str | None
    after: str
    created: bool = False

    @property
    def is_change(self) -> bool:
        return self.before != self.after


def generate_runtime_hook(
    tree: SourceTree,
    out_dir: Path,
    policy_config: PolicyConfigLike,
    spec: HookSpec | None = None,
    options: HookOptions = DEFAULT_OPTIONS,
) -> Applied | AlreadyPresent:
    """Write the ``--mode runtime`` directory for the release in ``tree`` into ``out_dir``.

    Raises :class:`~sgtrace.errors.HookSiteNotFoundError` when a site is missing. A plugin of
    another tool (the tracer) already listed in ``out_dir`` is kept.
    """
    spec = spec if spec is not None else locate_sites(tree)
    manifest = _read_text(out_dir / MANIFEST)
    files = render_boot_files([boot_plugin(spec, policy_config, options)], manifest)
    changed = sorted(name for name, text in files.items() if _read_text(out_dir / name) != text)
    if not changed:
        return AlreadyPresent(out_dir, tuple(sorted(files)), spec)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in changed:
        (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(out_dir / name, files[name].encode("utf-8"))
    return Applied(out_dir, tuple(changed), spec)


def patch_source(
    tree: SourceTree,
    policy_config: PolicyConfigLike,
    write: bool = False,
    revert: bool = False,
    spec: HookSpec | None = None,
    options: HookOptions = DEFAULT_OPTIONS,
) -> PatchResult:
    """Plan, apply (``write``) or undo (``revert``) the ``--mode patch`` codemod on ``tree``."""
    if revert:
        return revert_patch(tree)
    spec = spec if spec is not None else locate_sites(tree)
    changes = plan_patch(tree.root, spec, policy_config, options)
    touched = tuple(c.path for c in changes if c.is_change)
    diff = render_diff(changes)
    if not touched:
        return PatchResult(PatchStatus.ALREADY_PRESENT, "", tuple(c.path for c in changes), spec)
    if not write:
        return PatchResult(PatchStatus.PLANNED, diff, touched, spec)
    _write_patch(tree.root, _package(spec), changes)
    return PatchResult(PatchStatus.APPLIED, diff, touched, spec)


def plan_patch(
    root: Path,
    spec: HookSpec,
    policy_config: PolicyConfigLike,
    options: HookOptions = DEFAULT_OPTIONS,
) -> list[FileChange]:
    """Every file of the patch, sorted, with its text now and after patching. Reads only.

    Each Python text after patching is compiled, so a patch that applies also compiles.
    """
    from sgtrace.hooks.inject import Insertion, inject_source, is_patched  # libcst, on use

    package = _package(spec)
    insertions: dict[str, list[Insertion]] = {}
    decide = Insertion.after_call(
        spec.decide.caller.qualname, spec.decide.target.short, DECIDE_GUARD, "on_decode_result"
    )
    attach = Insertion.at_end(spec.attach.target.qualname, "attach", "self")
    insertions.setdefault(spec.decide.file, []).append(decide)
    insertions.setdefault(spec.attach.file, []).append(attach)
    changes = []
    for path, wanted in sorted(insertions.items()):
        before = _read_text(root / path)
        if before is None:
            raise SgtraceError(f"cannot patch: {root / path} does not exist")
        after = before if is_patched(before) else inject_source(before, path, wanted, package)
        changes.append(FileChange(path, before, after))
    created = hook_files(spec, policy_config, options)
    for name, text in sorted(created.items()):
        path = f"{package}/{name}"
        changes.append(FileChange(path, _read_text(root / path), text, created=True))
    for change in changes:
        if change.path.endswith(".py"):
            _check_compiles(change)
    return changes


def revert_patch(tree: SourceTree) -> PatchResult:
    """Restore every file the patch changed from its backup and delete what it created."""
    found = [pkg for pkg in tree.packages if (tree.root / pkg / PATCH_MANIFEST).exists()]
    if not found:
        return PatchResult(PatchStatus.NOT_PATCHED, "", (), None)
    manifest_path = tree.root / found[0] / PATCH_MANIFEST
    record = json.loads(manifest_path.read_text("utf-8"))
    changes = []
    for path, entry in sorted(record["modified"].items()):
        current = (tree.root / path).read_bytes()
        original = (tree.root / entry["backup"]).read_bytes()
        if current != original and _sha256(current) != entry["sha256"]:
            raise SgtraceError(
                f"cannot revert {tree.root / path}: it changed after the patch was applied; "
                f"compare it with {tree.root / entry['backup']} and restore by hand"
            )
        changes.append(FileChange(path, current.decode("utf-8"), original.decode("utf-8")))
    for path in sorted(record["created"]):
        text = _read_text(tree.root / path)
        if text is not None:
            changes.append(FileChange(path, text, "", created=True))
    diff = render_diff(changes, deleted=frozenset(record["created"]))
    for path, entry in sorted(record["modified"].items()):
        os.replace(tree.root / entry["backup"], tree.root / path)
    for path in record["created"]:
        (tree.root / path).unlink(missing_ok=True)
    _remove_created_folders(tree.root, record["created"])
    manifest_path.unlink()
    return PatchResult(PatchStatus.REVERTED, diff, tuple(c.path for c in changes), None)


def _remove_created_folders(root: Path, created: list[str]) -> None:
    """Remove the folders the patch created (the payload package), now empty but for caches."""
    for folder in sorted({Path(path).parent for path in created}, reverse=True):
        where = root / folder
        if folder.parent == Path(".") or not where.is_dir():
            continue  # SGLang's own top package
        shutil.rmtree(where / "__pycache__", ignore_errors=True)
        if not any(where.iterdir()):
            where.rmdir()


def render_diff(changes: list[FileChange], deleted: frozenset[str] = frozenset()) -> str:
    """The unified diff of ``changes``; created files come from ``/dev/null``."""
    parts = []
    for change in changes:
        if not change.is_change:
            continue
        old = "/dev/null" if change.before is None else f"a/{change.path}"
        new = "/dev/null" if change.path in deleted else f"b/{change.path}"
        after = "" if change.path in deleted else change.after
        parts.extend(
            difflib.unified_diff(
                (change.before or "").splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=old,
                tofile=new,
            )
        )
    return "".join(line if line.endswith("\n") else line + "\n" for line in parts)


def _package(spec: HookSpec) -> str:
    return spec.decide.caller.module.split(".", 1)[0]


def _check_compiles(change: FileChange) -> None:
    try:
        compile(change.after, change.path, "exec")
    except SyntaxError as exc:
        raise SgtraceError(
            f"the patched {change.path} does not compile ({exc.msg}, line {exc.lineno}); "
            "nothing was written, please report this with the --source release"
        ) from exc


def _write_patch(root: Path, package: str, changes: list[FileChange]) -> None:
    manifest_path = root / package / PATCH_MANIFEST
    record = json.loads(_read_text(manifest_path) or '{"modified": {}, "created": []}')
    for change in changes:
        if not change.is_change:
            continue
        if change.created:
            record["created"] = sorted({*record["created"], change.path})
            continue
        backup = change.path + BACKUP_SUFFIX
        if not (root / backup).exists():
            shutil.copy2(root / change.path, root / backup)
        record["modified"][change.path] = {
            "backup": backup,
            "sha256": _sha256(change.after.encode("utf-8")),
        }
    _atomic_write(manifest_path, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    for change in changes:
        if change.is_change:
            (root / change.path).parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(root / change.path, change.after.encode("utf-8"))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it; keep the file's mode."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if path.exists():
            shutil.copymode(path, tmp)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
