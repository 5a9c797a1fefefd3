#!/usr/bin/env python3
"""Write, on this machine, the runtime directories sweep.sh's hook servers run with.

The GPU machine has no sgtrace dependencies, so the sites are located here from SGLang's
source (downloaded once, cached) and the directories travel in a carried folder:

    python bench/live/prepare_sweep.py --policy bench/results/live/sweep_policy.json
    # .carry/sweep/hook (hook), hooktraced (hook + tracer), traced (tracer alone),
    # plainoff (the hook held off: what "off", SGLang's plain decode path, costs),
    # cal (the hook with the calibrated policy's defaults: --preset calibrated)
    python bench/live/prepare_sweep.py --policy P --draft-policy mid=P_MID
    # and .carry/sweep/hook-mid: the hook with the policy calibrated for draft "mid"
    # (sweep.sh runs hook:mid with it)
    python bench/live/prepare_sweep.py --only plainoff
    # only that one (about 190 KiB: what the device call carries counts, 64 MiB in all)
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Collection
from pathlib import Path

from plan_schema import did_you_mean  # beside this script
from prepare_hook_check import PLAIN_POLICIES

from sgtrace.graphs.build import Project
from sgtrace.graphs.source import open_source
from sgtrace.hooks.apply import generate_runtime_hook
from sgtrace.hooks.policy_config import load_policy_config
from sgtrace.hooks.sites import locate_sites
from sgtrace.payload.config import HookOptions
from sgtrace.tracer.launch import prepare_trace_dir
from sgtrace.tracer.static import selection_from_source

# the hook held off at every batch size (plainoff): measures what "off" costs on this release;
# the policy of prepare_hook_check.py --plain's plain_off, the batch-size preset held off
PLAIN_HELD_OFF = PLAIN_POLICIES["plain_off"]
# cal: the calibrated policy with its defaults, beside the hook of --policy (issue 21's runs
# measure both against the better server in the same turns)
CALIBRATED = {"preset": "calibrated"}


def write_dirs(
    tree,
    policy,
    out: Path,
    drafts=(),
    log_measurements: bool = True,
    only: Collection[str] = (),
) -> list[Path]:
    """``hook``, ``hooktraced``, ``traced``, ``plainoff``, ``cal`` and ``hook-DRAFT`` under
    ``out``, or those of them named in ``only``.

    ``drafts``: ``(name, policy)`` pairs, one ``hook-NAME`` directory each;
    ``log_measurements``: a measuring hook logs each measurement at INFO (sweep_report reads
    them), the plan's ``hook.log_measurements``.
    """
    spec = locate_sites(tree)  # refuses, naming it, a release the hook cannot switch on
    static = selection_from_source(Project(tree))
    plain_held_off = load_policy_config(None, PLAIN_HELD_OFF)
    written = []
    options = HookOptions(log_measurements=log_measurements)
    dirs = (
        ("hook", policy, False),
        ("hooktraced", policy, True),
        ("traced", None, True),
        ("plainoff", plain_held_off, False),
        ("cal", load_policy_config(None, CALIBRATED), False),
        *((f"hook-{draft}", draft_policy, False) for draft, draft_policy in drafts),
    )
    names = [name for name, *_ in dirs]
    for name in only:
        if name not in names:
            raise SystemExit(f"--only {name}: no such directory{did_you_mean(name, names)}")
    for name, hook, trace in dirs:
        if only and name not in only:
            continue
        target = out / name
        shutil.rmtree(target, ignore_errors=True)
        if hook:
            generate_runtime_hook(tree, target, hook, spec, options)
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
        help="the policy of the hook servers of one draft (hook:DRAFT); repeatable",
    )
    parser.add_argument("--out", type=Path, default=Path(".carry/sweep"))
    parser.add_argument(
        "--only",
        nargs="+",
        default=[],
        metavar="NAME",
        help="write only these directories (e.g. plainoff); the others are left as they are",
    )
    parser.add_argument(
        "--plan",
        type=Path,
        default=Path(__file__).parent / "plans" / "default.toml",
        help="the sweep plan whose [hook] settings the directories get (sweep_plan.py)",
    )
    args = parser.parse_args()
    from sweep_plan import load_plan  # beside this script

    hook_settings = load_plan(args.plan).hook
    policy = load_policy_config(args.policy)
    drafts = []
    for item in args.draft_policy:
        draft, sep, path = item.partition("=")
        if not sep or not draft or not path:
            parser.error(f"--draft-policy {item!r}: expected DRAFT=FILE, e.g. mid=policy.json")
        drafts.append((draft, load_policy_config(Path(path))))
    tree = open_source(args.source)
    log = hook_settings.log_measurements
    for path in write_dirs(tree, policy, args.out, drafts, log, args.only):
        print(f"{path}: {', '.join(sorted(p.name for p in path.iterdir()))}")
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(f"{args.out}: {size / 2**20:.2f} MiB in all (a device call carries 64 MiB at most)")
    print(policy.to_json(), end="")
    for draft, draft_policy in drafts:
        print(f"hook-{draft}:", draft_policy.to_json(), end="")


if __name__ == "__main__":
    main()
