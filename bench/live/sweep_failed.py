"""The turns of a sweep that measured nothing: a server that died or never listened.

Such a turn completed no request and every request of it failed; ``sweep_report.py`` leaves it
out of its level (a server's level with no other turn is no row, never a 0 tok/s server) and
lists it with :func:`failed_markdown`.

>>> failed_turn({"requests": 0, "errors": 256}), failed_turn({"requests": 128, "errors": 3})
(True, False)
>>> failed_turn({"requests": 0, "errors": 0})  # a turn that sent nothing: not a failure
False
"""

from __future__ import annotations

from collections.abc import Sequence


def failed_turn(row: dict) -> bool:
    """Whether the turn ``row`` (a line of sweep.jsonl) completed no request and failed some."""
    return not row["requests"] and bool(row["errors"])


def failed_markdown(failed: Sequence[dict]) -> str:
    """Markdown: the servers' levels whose turns completed no request, with a sample error."""
    groups: dict[tuple[str, str, int], list[dict]] = {}
    for row in failed:
        groups.setdefault((row["call"], row["label"], row["concurrency"]), []).append(row)
    if not groups:
        return ""
    lines = [
        "",
        "Turns that completed no request (left out of every table above; the server's log says "
        "why):",
        "",
        "| call | server | c | turns | errors | first error |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for (call, label, conc), rows in sorted(groups.items()):
        sample = next((e for r in rows for e in r.get("error_sample", ())), "")
        sample = sample.replace("|", "/")[:80]
        errors = sum(r["errors"] for r in rows)
        lines.append(f"| {call} | {label} | {conc} | {len(rows)} | {errors} | {sample} |")
    return "\n".join(lines) + "\n"
