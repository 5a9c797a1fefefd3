"""File I/O of ``inject-hook``: the runtime directory, the source patch, its backup and revert.

* :func:`generate_runtime_hook` (``--mode runtime``) writes a bootstrap directory: the
  ``sitecustomize`` of :mod:`sgtrace.bootstrap`, the payload package and the hook's config. SGLang's files
  are not touched. A directory that already holds the same files is left alone.
* :func:`patch_source` (``--mode patch``) computes the codemod of :mod:`sgtrace.hooks.inject` and
  returns its unified diff; with ``write`` it keeps each original as ``<file>.sgtrace-orig``
  (byte for byte), records in ``sglang/sgtrace_hook_patch.json`` the sha256 of each original and
  of each patched file (:mod:`sgtrace.hooks.patch_record`) and replaces the files atomically; a
  second run finds the marker and changes nothing; ``revert`` restores only the originals the
  record proves, byte for byte, and deletes what the patch created. It refuses sgtrace's own
  download cache (``--source sglang==X``), which later runs read.

Every file is written through a temporary file beside it (``.<name>.sgtrace-tmp.*``) and
:func:`os.replace`, so a reader never sees half a file; a write or revert killed at any point is
finished by running it again, which first deletes the temporary files a kill left. The
filesystem operations are passed in (:class:`FileOps`), so tests can stop at each one.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sgtrace.bootstrap import MANIFEST, render_boot_files
from sgtrace.errors import SgtraceError
from sgtrace.graphs.source import RELEASE, SourceTree
from sgtrace.hooks.diff import render_diff, revert_diff
from sgtrace.hooks.patch_record import (
    EMPTY_RECORD,
    Action,
    FileAction,
    FileChange,
    FileOps,
    PatchRecord,
    PatchResult,
    PatchStatus,
    plan_revert,
    plan_write,
    sha256,
)
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
TEMP_MARK = ".sgtrace-tmp."


@dataclass(frozen=True)
class OsFileOps:
    """:class:`FileOps` on the real filesystem."""

    def write_temp(self, beside: Path, data: bytes, mode: int) -> Path:
        fd, name = tempfile.mkstemp(prefix=f".{beside.name}{TEMP_MARK}", dir=beside.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(name, mode)
        return Path(name)

    def replace(self, source: Path, target: Path) -> None:
        os.replace(source, target)

    def unlink(self, path: Path) -> None:
        path.unlink(missing_ok=True)


OS_FILE_OPS = OsFileOps()


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
    ops: FileOps = OS_FILE_OPS,
    show_diff: bool = False,
    options: HookOptions = DEFAULT_OPTIONS,
) -> PatchResult:
    """Plan, apply (``write``) or undo (``revert``) the ``--mode patch`` codemod on ``tree``.

    A revert's diff is computed only with ``show_diff``; a plan or write always has its diff.
    """
    if revert:
        return revert_patch(tree, ops, show_diff)
    if write:
        refuse_download_cache(tree)
    spec = spec if spec is not None else locate_sites(tree)
    changes = plan_patch(tree.root, spec, policy_config, options)
    touched = tuple(c.path for c in changes if c.is_change)
    diff = render_diff(changes)
    if not touched:
        return PatchResult(PatchStatus.ALREADY_PRESENT, "", tuple(c.path for c in changes), spec)
    if not write:
        return PatchResult(PatchStatus.PLANNED, diff, touched, spec)
    actions = _write_patch(tree.root, _package(spec), changes, ops)
    return PatchResult(PatchStatus.APPLIED, diff, touched, spec, actions)


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


def revert_patch(
    tree: SourceTree, ops: FileOps = OS_FILE_OPS, show_diff: bool = False
) -> PatchResult:
    """Restore every file the patch changed from its backup and delete what it created.

    Every file is first checked against the record's hashes; if any cannot be proven (SGLang
    upgraded in place, a file edited, a backup missing), nothing is touched and the error lists
    them. A revert killed part-way is finished by running it again.
    """
    found = [pkg for pkg in tree.packages if (tree.root / pkg / PATCH_MANIFEST).exists()]
    if not found:
        return PatchResult(PatchStatus.NOT_PATCHED, "", (), None, _clean_unrecorded(tree, ops))
    root, record_path = tree.root, tree.root / found[0] / PATCH_MANIFEST
    record = _read_record(record_path)
    paths = {p for e in record.modified for p in (e.path, e.backup)}
    contents = {p: _read_bytes(root / p) for p in paths | {e.path for e in record.created}}
    plan = plan_revert(record, contents)
    if plan.refusals:
        raise SgtraceError(
            f"cannot revert the sgtrace patch in {root}; nothing was changed:\n"
            + "".join(f"  {line}\n" for line in plan.refusals)
            + "Reinstall SGLang's files (pip install --force-reinstall --no-deps sglang==VERSION), "
            f"then delete {record_path} and the *{BACKUP_SUFFIX} files; or compare each file "
            "with its backup and restore by hand"
        )
    created = {e.path for e in record.created}
    recorded = paths | created | {record_path.relative_to(root).as_posix()}
    actions = list(_clean_temps(root, recorded, ops))
    diff = revert_diff(record, plan, contents) if show_diff else ""
    if plan.record != record:  # bind a version 1 record's backups before acting on them
        _atomic_write(record_path, plan.record.to_json().encode("utf-8"), ops)
    for entry in plan.record.modified:
        backup = contents[entry.backup]
        if entry.path in plan.restores:
            ops.replace(root / entry.backup, root / entry.path)
            actions.append(FileAction(entry.path, Action.RESTORED, len(backup or b"")))
        elif backup is not None and sha256(backup) == entry.original_sha256:
            ops.unlink(root / entry.backup)
            actions.append(FileAction(entry.backup, Action.DELETED, len(backup)))
    for path in plan.deletes:
        ops.unlink(root / path)
        actions.append(FileAction(path, Action.DELETED, len(contents[path] or b"")))
    _remove_created_folders(root, tuple(sorted(created)))
    ops.unlink(record_path)
    files = (*plan.restores, *plan.done, *plan.deletes)
    return PatchResult(PatchStatus.REVERTED, diff, tuple(sorted(files)), None, tuple(actions))


def _remove_created_folders(root: Path, created: tuple[str, ...]) -> None:
    """Remove the folders the patch created (the payload package), now empty but for caches."""
    for folder in sorted({Path(path).parent for path in created}, reverse=True):
        where = root / folder
        if folder.parent == Path(".") or not where.is_dir():
            continue  # SGLang's own top package
        shutil.rmtree(where / "__pycache__", ignore_errors=True)
        if not any(where.iterdir()):
            where.rmdir()


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


def refuse_download_cache(tree: SourceTree) -> None:
    """Raise unless ``tree`` may be patched: never sgtrace's shared download cache."""
    if RELEASE.match(tree.label):
        raise SgtraceError(
            f"refusing to patch {tree.root}: it is sgtrace's shared download cache of "
            f"{tree.label}, read by every later --source {tree.label} run, not an SGLang that "
            "runs. Patch the installed sglang (leave out --source) or a copy of the release: "
            f"cp -r {tree.root} /tmp/sglang-src, then --source /tmp/sglang-src"
        )


def _write_patch(
    root: Path, package: str, changes: list[FileChange], ops: FileOps
) -> tuple[FileAction, ...]:
    """Backups first, then the record, then the files: a write killed at any point is finished
    by running it again, and a revert after the kill undoes what was written."""
    record_path = root / package / PATCH_MANIFEST
    record = _read_record(record_path) if record_path.exists() else EMPTY_RECORD
    edits = {
        c.path: ((c.before or "").encode("utf-8"), c.after.encode("utf-8"))
        for c in changes
        if not c.created
    }
    created = {c.path: c.after.encode("utf-8") for c in changes if c.created}
    paths = {*edits, *(p + BACKUP_SUFFIX for p in edits)}
    paths |= {p for e in record.modified for p in (e.path, e.backup)}
    contents = {p: _read_bytes(root / p) for p in paths}
    plan = plan_write(record, edits, created, contents, BACKUP_SUFFIX)
    if plan.refusals:
        raise SgtraceError(
            f"cannot write the sgtrace patch in {root}; nothing was changed:\n"
            + "".join(f"  {line}\n" for line in plan.refusals)
            + "Revert it first (--revert), or reinstall SGLang's files "
            "(pip install --force-reinstall --no-deps sglang==VERSION) and write again"
        )
    actions = list(_clean_temps(root, paths | set(created), ops))
    for path in plan.backups:
        before = edits[path][0]
        _atomic_write(root / (path + BACKUP_SUFFIX), before, ops, _mode(root / path))
        kind = Action.RENEWED_BACKUP if path in plan.renewed else Action.BACKED_UP
        actions.append(FileAction(path + BACKUP_SUFFIX, kind, len(before)))
    for path in plan.dropped:
        entry = record.entry(path)
        stale = None if entry is None else contents.get(entry.backup)
        if entry is not None and stale is not None:
            ops.unlink(root / entry.backup)
            actions.append(FileAction(entry.backup, Action.DROPPED, len(stale)))
    _atomic_write(record_path, plan.record.to_json().encode("utf-8"), ops)
    for change in changes:
        if change.is_change:
            data = change.after.encode("utf-8")
            (root / change.path).parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(root / change.path, data, ops)
            kind = Action.CREATED if change.created else Action.PATCHED
            actions.append(FileAction(change.path, kind, len(data)))
    return tuple(actions)


def _read_record(path: Path) -> PatchRecord:
    try:
        return PatchRecord.from_json(path.read_bytes().decode("utf-8"), str(path))
    except (ValueError, OSError) as exc:
        raise SgtraceError(str(exc)) from exc


def _clean_temps(root: Path, paths: set[str], ops: FileOps) -> Iterator[FileAction]:
    """Delete the temporary files a killed write or revert left beside ``paths``."""
    for folder in sorted({(root / p).parent for p in paths}):
        for temp in sorted(folder.glob(f".*{TEMP_MARK}*")):
            ops.unlink(temp)
            yield FileAction(temp.relative_to(root).as_posix(), Action.CLEANED, 0)


def _clean_unrecorded(tree: SourceTree, ops: FileOps) -> tuple[FileAction, ...]:
    """What a write stopped before its record leaves: temporary files, and backups equal to
    the file beside them."""
    actions: list[FileAction] = []
    for package in tree.packages:
        for backup in sorted((tree.root / package).rglob(f"*{BACKUP_SUFFIX}")):
            original = backup.with_name(backup.name.removesuffix(BACKUP_SUFFIX))
            data = _read_bytes(backup)
            if data is not None and data == _read_bytes(original):
                ops.unlink(backup)
                actions.append(FileAction(tree.relative(backup), Action.DELETED, len(data)))
        temps = {tree.relative(t) for t in (tree.root / package).rglob(f".*{TEMP_MARK}*")}
        actions.extend(_clean_temps(tree.root, temps, ops))
    return tuple(actions)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _read_text(path: Path) -> str | None:
    data = _read_bytes(path)
    return None if data is None else data.decode("utf-8")


def _atomic_write(
    path: Path, data: bytes, ops: FileOps = OS_FILE_OPS, mode: int | None = None
) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it; keep the file's mode."""
    temp = ops.write_temp(path, data, _mode(path) if mode is None else mode)
    try:
        ops.replace(temp, path)
    except BaseException:
        ops.unlink(temp)
        raise
