#!/usr/bin/env python3
"""Write, on this machine, the runtime directories sweep.sh's hook servers run with.

The GPU machine has no sgtrace dependencies, so the sites are located here from SGLang's
source (downloaded once, cached) and the directories travel in a carried folder:

    python bench/live/prepare_sweep.py --policy bench/results/live/sweep_policy.json
    # .carry/sweep/hook (hook), hooktraced (hook + tracer), traced (tracer alone),
    # hookoff (the hook held off: what "off" costs)
    python bench/live/prepare_sweep.py --policy P --draft-policy mid=P_MID
    # and .carry/sweep/hook-mid: the hook with the policy calibrated for draft "mid"
    # (sweep.sh runs hook:mid and hookcold:mid with it)
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from sgtrace.graphs.build import Project
from sgtrace.graphs.source import open_source
from sgtrace.hooks.apply import generate_runtime_hook
from sgtrace.hooks.policy_config import load_policy_config
from sgtrace.hooks.sites import locate_sites
from sgtrace.tracer.launch import prepare_trace_dir
from sgtrace.tracer.static import selection_from_source

# the hook held off at every batch size: measures what "off" costs on this release
HELD_OFF = {"on_below": 0, "off_above": 1, "acceptance_gate": False, "min_dwell_steps": 0}


def write_dirs(tree, version: str, policy, out: Path, drafts=()) -> list[Path]:
    """``hook``, ``hooktraced``, ``traced``, ``hookoff`` and ``hook-DRAFT`` under ``out``.

    ``drafts``: ``(name, policy)`` pairs, one ``hook-NAME`` directory each.
    """
    spec = locate_sites(tree)
    if not spec.can_switch:
        raise SystemExit(f"SGLang {version} cannot switch speculation off: {spec.family_reason}")
    static = selection_from_source(Project(tree))
    held_off = load_policy_config(None, HELD_OFF)
    written = []
    for name, hook, trace in (
        ("hook", policy, False),
        ("hooktraced", policy, True),
        ("traced", None, True),
        ("hookoff", held_off, False),
        *((f"hook-{draft}", draft_policy, False) for draft, draft_policy in drafts),
    ):
        target = out / name
        shutil.rmtree(target, ignore_errors=True)
        if hook:
            generate_runtime_hook(tree, target, hook, spec)
        if trace:
            prepare_trace_dir(target, static.selection)
        written.append(target)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="sglang==0.5.16")
    parser.add_argument("--policy", type=Path, help="policy file (calibrate_policy.py writes one)")
    parser.add_argument(
        "--draft-policy",
        action="append",
        default=[],
        metavar="DRAFT=FILE",
        help="the policy of the hook servers of one draft (hook:DRAFT, hookcold:DRAFT); repeatable",
    )
    parser.add_argument("--out", type=Path, default=Path(".carry/sweep"))
    args = parser.parse_args()
    policy = load_policy_config(args.policy)
    drafts = []
    for item in args.draft_policy:
        draft, sep, path = item.partition("=")
        if not sep or not draft or not path:
            parser.error(f"--draft-policy {item!r}: expected DRAFT=FILE, e.g. mid=policy.json")
        drafts.append((draft, load_policy_config(Path(path))))
    version = args.source.split("==", 1)[1]
    for path in write_dirs(open_source(args.source), version, policy, args.out, drafts):
        print(f"{path}: {', '.join(sorted(p.name for p in path.iterdir()))}")
    print(policy.to_json(), end="")
    for draft, draft_policy in drafts:
        print(f"hook-{draft}:", draft_policy.to_json(), end="")


if __name__ == "__main__":
    main()
