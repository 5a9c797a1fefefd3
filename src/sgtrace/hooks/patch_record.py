"""What a ``--mode patch`` write or revert did, bound to content, and how to undo it. Pure.

The record (``sglang/sgtrace_hook_patch.json``) keeps, for every SGLang file the patch edits,
the sha256 of the original it replaced and of the patched text it wrote, and the backup that
holds the original; for every file the patch creates, the sha256 of each version written. A
revert acts only on what these hashes prove, so a backup of an older release (SGLang upgraded
in place between two writes) is never restored over a newer file.

:func:`plan_revert` decides from the bytes on disk, before anything is touched, what each file
needs: restored from its backup, already restored (a revert killed part-way), deleted, or
unprovable (the revert refuses and keeps everything).

>>> record = PatchRecord(
...     modified=(ModifiedEntry("p/a.py", "p/a.py.sgtrace-orig", sha256(b"old"), sha256(b"new")),),
...     created=(),
... )
>>> plan = plan_revert(record, {"p/a.py": b"new", "p/a.py.sgtrace-orig": b"old"})
>>> plan.restores, plan.refusals
(('p/a.py',), ())
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sgtrace.hooks.spec import HookSpec

RECORD_VERSION = 2
MARKER = "# sgtrace-hook"  # ends each line the codemod inserts (inject.MARKER; no libcst here)


def sha256(data: bytes) -> str:
    """The hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


class FileOps(Protocol):
    """The filesystem operations of a write or revert; tests pass one that stops at any call."""

    def write_temp(self, beside: Path, data: bytes, mode: int) -> Path:
        """A new temporary file holding ``data`` in ``beside``'s folder, named with TEMP_MARK."""
        ...

    def replace(self, source: Path, target: Path) -> None: ...

    def unlink(self, path: Path) -> None:
        """Delete ``path``; a missing one is no error."""
        ...


class Action(Enum):
    """What a write or revert did to one file."""

    BACKED_UP = "backed up"
    RENEWED_BACKUP = "backed up anew (the file changed since the last write: SGLang upgraded?)"
    PATCHED = "patched"
    CREATED = "written"
    DROPPED = "deleted (the backup of a file replaced since the patch, e.g. by an upgrade)"
    RESTORED = "restored from its backup"
    DELETED = "deleted"
    CLEANED = "deleted (temporary file of an interrupted run)"


@dataclass(frozen=True)
class FileAction:
    """One file a write or revert touched; ``size`` in bytes (restored, written or deleted)."""

    path: str
    action: Action
    size: int

    def __str__(self) -> str:
        return f"{self.path}: {self.action.value} ({self.size:,} bytes)"


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
    actions: tuple[FileAction, ...] = ()

    def summary(self) -> str:
        """One line per file touched, then the totals: what ``--revert`` prints by default.

        >>> print(PatchResult(PatchStatus.REVERTED, "", ("a.py",), None,
        ...                   (FileAction("a.py", Action.RESTORED, 1200),)).summary())
          a.py: restored from its backup (1,200 bytes)
        1 file restored (1,200 bytes), 0 files deleted
        """
        kinds = (
            (Action.RESTORED, Action.DELETED)
            if self.status in (PatchStatus.REVERTED, PatchStatus.NOT_PATCHED)
            else (Action.PATCHED, Action.CREATED)
        )
        totals = []
        for kind in kinds:
            done = [a for a in self.actions if a.action is kind]
            files = "file" if len(done) == 1 else "files"
            size = f" ({sum(a.size for a in done):,} bytes)" if kind is kinds[0] else ""
            totals.append(f"{len(done)} {files} {kind.value.split(' ')[0]}{size}")
        return "\n".join([*(f"  {action}" for action in self.actions), ", ".join(totals)])


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


@dataclass(frozen=True)
class ModifiedEntry:
    """An SGLang file the patch edited; ``original_sha256`` is ``None`` in a version 1 record
    (sgtrace before backups were bound to content)."""

    path: str
    backup: str
    original_sha256: str | None
    patched_sha256: str


@dataclass(frozen=True)
class CreatedEntry:
    """A file the patch created; ``sha256s``: every version written (empty: version 1)."""

    path: str
    sha256s: tuple[str, ...] = ()


@dataclass(frozen=True)
class PatchRecord:
    """The patch record of one package, sorted by path."""

    modified: tuple[ModifiedEntry, ...]
    created: tuple[CreatedEntry, ...]
    version: int = RECORD_VERSION

    def to_json(self) -> str:
        data = {
            "version": RECORD_VERSION,
            "modified": {
                e.path: {
                    "backup": e.backup,
                    "original_sha256": e.original_sha256,
                    "patched_sha256": e.patched_sha256,
                }
                for e in sorted(self.modified, key=lambda e: e.path)
            },
            "created": {
                e.path: list(e.sha256s) for e in sorted(self.created, key=lambda e: e.path)
            },
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> PatchRecord:
        """Read a record of version 1 or 2; ``ValueError`` naming ``where`` when damaged."""
        try:
            data = json.loads(text)
            version = int(data.get("version", 1))
            modified = tuple(
                ModifiedEntry(
                    path=str(path),
                    backup=str(entry["backup"]),
                    original_sha256=None if version < 2 else str(entry["original_sha256"]),
                    patched_sha256=str(entry["patched_sha256" if version >= 2 else "sha256"]),
                )
                for path, entry in sorted(data["modified"].items())
            )
            created_data = data["created"]
            created = tuple(
                CreatedEntry(str(path), tuple(str(s) for s in created_data[path]))
                if isinstance(created_data, dict)
                else CreatedEntry(str(path))
                for path in sorted(created_data)
            )
            for path in [p for e in modified for p in (e.path, e.backup)] + [
                e.path for e in created
            ]:
                if path.startswith("/") or ".." in path.split("/"):
                    raise ValueError(f"path {path!r} leaves the source tree")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(
                f"{where} is not an sgtrace patch record ({exc}); nothing was changed. Restore "
                "SGLang's files by reinstalling it "
                "(pip install --force-reinstall --no-deps sglang==VERSION)"
            ) from exc
        return cls(modified, created, version)

    def entry(self, path: str) -> ModifiedEntry | None:
        return next((e for e in self.modified if e.path == path), None)

    def with_created(self, path: str, digest: str) -> PatchRecord:
        """This record with ``digest`` added to the versions of created file ``path``."""
        old = next((e for e in self.created if e.path == path), CreatedEntry(path))
        new = replace(old, sha256s=tuple(dict.fromkeys((*old.sha256s, digest))))
        others = tuple(e for e in self.created if e.path != path)
        return replace(self, created=tuple(sorted((*others, new), key=lambda e: e.path)))

    def with_modified(self, entry: ModifiedEntry) -> PatchRecord:
        others = tuple(e for e in self.modified if e.path != entry.path)
        return replace(self, modified=tuple(sorted((*others, entry), key=lambda e: e.path)))

    def without_modified(self, path: str) -> PatchRecord:
        return replace(self, modified=tuple(e for e in self.modified if e.path != path))


EMPTY_RECORD = PatchRecord((), ())


def strip_hook_lines(text: bytes) -> bytes:
    """``text`` without the lines the codemod inserted (they end with :data:`MARKER`)."""
    lines = text.splitlines(keepends=True)
    return b"".join(line for line in lines if not line.rstrip().endswith(MARKER.encode()))


def is_proven_backup(entry: ModifiedEntry, current: bytes, backup: bytes) -> bool:
    """Whether ``backup`` is the original the patch turned into ``current``: by its recorded
    hash (version 2), or, for a version 1 record, by ``current`` less the hook's lines."""
    if entry.original_sha256 is not None:
        return sha256(backup) == entry.original_sha256
    return strip_hook_lines(current) == backup


@dataclass(frozen=True)
class RevertPlan:
    """What a revert does, decided before it touches anything. ``refusals``: one line per file
    whose state cannot be proven; a plan with refusals is not carried out."""

    restores: tuple[str, ...] = ()  # paths restored from their backup
    done: tuple[str, ...] = ()  # paths already holding their original; the backup is dropped
    deletes: tuple[str, ...] = ()  # created files to delete
    refusals: tuple[str, ...] = ()
    record: PatchRecord = field(default=EMPTY_RECORD)  # version 2, every original hash known


def plan_revert(record: PatchRecord, contents: Mapping[str, bytes | None]) -> RevertPlan:
    """Decide the revert of ``record`` from ``contents`` (path -> bytes, ``None``: missing)."""
    restores: list[str] = []
    done: list[str] = []
    refusals: list[str] = []
    proven = record
    for entry in record.modified:
        current, backup = contents.get(entry.path), contents.get(entry.backup)
        digest = None if current is None else sha256(current)
        if digest is not None and digest == entry.original_sha256:
            done.append(entry.path)
        elif digest == entry.patched_sha256 and current is not None:
            if backup is None:
                refusals.append(f"{entry.path}: its backup {entry.backup} is missing")
            elif not is_proven_backup(entry, current, backup):
                refusals.append(
                    f"{entry.path}: its backup {entry.backup} is not the original this patch "
                    "replaced (another release's file?)"
                )
            else:
                restores.append(entry.path)
                proven = proven.with_modified(replace(entry, original_sha256=sha256(backup)))
        elif current is None:
            refusals.append(f"{entry.path}: missing")
        else:
            refusals.append(
                f"{entry.path}: neither the file the patch wrote nor its original (SGLang "
                "upgraded or the file edited after the patch?)"
            )
    deletes: list[str] = []
    for created in record.created:
        current = contents.get(created.path)
        if current is None:
            continue
        if created.sha256s and sha256(current) not in created.sha256s:
            refusals.append(f"{created.path}: changed after sgtrace wrote it")
        else:
            deletes.append(created.path)
    return RevertPlan(
        tuple(restores), tuple(done), tuple(deletes), tuple(refusals), replace(proven, version=2)
    )


@dataclass(frozen=True)
class WritePlan:
    """What a write does besides writing the patched files, decided before it writes.

    ``backups``: files whose current (original) bytes go to their backup first; ``renewed``:
    those whose old backup held other bytes (SGLang upgraded in place since the last write);
    ``dropped``: entries of files the patch no longer edits that hold neither its text nor the
    original any more, whose backups are deleted; ``refusals`` as in :class:`RevertPlan`.
    """

    record: PatchRecord
    backups: tuple[str, ...] = ()
    renewed: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    refusals: tuple[str, ...] = ()


def plan_write(
    record: PatchRecord,
    edits: Mapping[str, tuple[bytes, bytes]],
    created: Mapping[str, bytes],
    contents: Mapping[str, bytes | None],
    backup_suffix: str,
) -> WritePlan:
    """Plan a write of ``edits`` (path -> (now, patched)) and ``created`` (path -> bytes) over
    ``record``; ``contents`` holds the bytes of every path and backup involved."""
    new = record
    backups: list[str] = []
    renewed: list[str] = []
    dropped: list[str] = []
    refusals: list[str] = []
    for path, (before, after) in sorted(edits.items()):
        old = record.entry(path)
        if MARKER.encode() in before:
            backup = None if old is None else contents.get(old.backup)
            if old is None or sha256(before) != old.patched_sha256 or backup is None:
                refusals.append(f"{path}: carries the hook but no recorded backup of its original")
            elif not is_proven_backup(old, before, backup):
                refusals.append(f"{path}: its backup {old.backup} is not its original")
            else:
                new = new.with_modified(replace(old, original_sha256=sha256(backup)))
            continue
        backup_path = path + backup_suffix
        held = contents.get(backup_path)
        if held != before:
            backups.append(path)
            if held is not None:
                renewed.append(path)
        new = new.with_modified(ModifiedEntry(path, backup_path, sha256(before), sha256(after)))
    for entry in record.modified:
        if entry.path in edits:
            continue
        current, backup = contents.get(entry.path), contents.get(entry.backup)
        is_ours = current is not None and sha256(current) == entry.patched_sha256
        if is_ours and current and backup is not None and is_proven_backup(entry, current, backup):
            new = new.with_modified(replace(entry, original_sha256=sha256(backup)))
        elif is_ours:
            refusals.append(f"{entry.path}: carries the hook but its backup is missing or wrong")
        else:
            new = new.without_modified(entry.path)
            dropped.append(entry.path)
    for path, data in sorted(created.items()):
        new = new.with_created(path, sha256(data))
    return WritePlan(
        replace(new, version=RECORD_VERSION),
        tuple(backups),
        tuple(renewed),
        tuple(dropped),
        tuple(refusals),
    )
