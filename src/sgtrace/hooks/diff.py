"""Unified diffs of a ``--mode patch`` write or revert. Pure: texts in, text out."""

from __future__ import annotations

import difflib

from sgtrace.hooks.patch_record import FileChange, PatchRecord, RevertPlan


def revert_diff(record: PatchRecord, plan: RevertPlan, contents: dict[str, bytes | None]) -> str:
    """The diff a revert makes: patched files back to their backups, created files deleted."""
    changes = [
        FileChange(e.path, _text(contents[e.path]), _text(contents[e.backup]))
        for e in record.modified
        if e.path in plan.restores
    ]
    changes += [FileChange(p, _text(contents[p]), "", created=True) for p in plan.deletes]
    return render_diff(changes, deleted=frozenset(plan.deletes))


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="replace")


def render_diff(changes: list[FileChange], deleted: frozenset[str] = frozenset()) -> str:
    """The unified diff of ``changes``; created files come from ``/dev/null``."""
    parts: list[str] = []
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
