#!/usr/bin/env python3
"""Generate, on this machine, the two runtime hook directories that hook_check.sh runs with.

The GPU machine has no sgtrace dependencies (libcst, networkx), so the sites are located here,
from SGLang 0.5.16's source (``--source`` names another release; downloaded once, cached), and
the generated directories travel in a carried folder (git-ignored):

    python bench/live/prepare_hook_check.py          # writes .carry/hook-check/{hook_bs,hook_default}

then, on the device: carry [".carry/live-sglang", ".carry/hook-check"],
command ``bash bench/live/hook_check.sh``. copy_check.sh's directories for SGLang 0.5.13, beside
the probe carry (prepare_probe_release.py) that runs it:

    python bench/live/prepare_hook_check.py --plain --source sglang==0.5.13 --share-payload \
      --out .carry/probe013/plain-check

It ends with the device call's size: the repo's files, the carried folder holding ``--out``
(``.carry/NAME``) and ``--carry-with`` folders; above 64 MiB it exits 1.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

from prepare_probe_release import report_size

from sgtrace.graphs.build import Project
from sgtrace.graphs.source import open_source
from sgtrace.hooks.apply import generate_runtime_hook
from sgtrace.hooks.policy_config import load_policy_config
from sgtrace.hooks.sites import locate_sites
from sgtrace.payload.config import HookOptions
from sgtrace.tracer.launch import prepare_trace_dir
from sgtrace.tracer.static import selection_from_source

POLICIES = {
    "hook_bs": {"preset": "batch-size"},  # on at batch size <= 8, off at >= 16, dwell 32
    "hook_default": {},  # plus the acceptance gate: a draft that accepts nothing goes off
}
# --plain: with the batch-size policy, held off, and with forced toggles every k steps
PLAIN_POLICIES = {
    "plain_bs": {"preset": "batch-size"},
    # off from the first decode result on: the plain decode path held
    "plain_off": {"preset": "batch-size", "off_above": 1, "on_below": 0, "min_dwell_steps": 0},
    **{f"plain_k{k}": {"toggle_every_steps": k} for k in (1, 2, 7, 64, 384)},
    "plain_k384c": {"toggle_every_steps": 384},  # with the catch-up (PLAIN_OPTIONS)
}
# the hook options of a directory where not the defaults: the re-entry with the catch-up
PLAIN_OPTIONS = {"plain_k384c": HookOptions(catch_up=True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="sglang==0.5.16")
    parser.add_argument("--out", type=Path, default=Path(".carry/hook-check"))
    parser.add_argument(
        "--overhead",
        action="store_true",
        help="also write trace_only (the tracer alone) and hook_broken (the batch-size hook "
        "that decides but never applies: validate must fail on its trace)",
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="also put the tracer (default selection of the static graph) in each directory",
    )
    parser.add_argument(
        "--trace-only",
        nargs="*",
        default=None,
        metavar="NAME",
        help="with --trace: join the tracer to these directories only",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="write the plain off state's checks instead (plain_bs, plain_off, plain_k1..plain_k384, "
        "plain_k384c: k384 with the catch-up)",
    )
    parser.add_argument(
        "--share-payload",
        action="store_true",
        help="keep the payload (sgtrace_payload/, sitecustomize.py) in the first directory only, "
        "to fit the carry: the device script copies it into the others (copy_check.sh)",
    )
    parser.add_argument(
        "--carry-with",
        nargs="*",
        default=[],
        type=Path,
        metavar="FOLDER",
        help="the other folders the device call carries (.carry/live-sglang), for the size",
    )
    args = parser.parse_args()
    tree = open_source(args.source)
    spec = locate_sites(tree)  # refuses, naming it, a release the hook cannot switch on
    print(spec.summary())
    for name, overrides in (PLAIN_POLICIES if args.plain else POLICIES).items():
        out = args.out / name
        shutil.rmtree(out, ignore_errors=True)
        policy = load_policy_config(None, overrides)
        options = PLAIN_OPTIONS.get(name, HookOptions()) if args.plain else HookOptions()
        result = generate_runtime_hook(tree, out, policy, spec, options)
        print(f"{out}: {', '.join(result.files)}")
        if args.trace and (args.trace_only is None or name in args.trace_only):
            static = selection_from_source(Project(tree))
            prepare_trace_dir(out, static.selection)
            print(f"{out}: tracer joined ({len(static.selection.probes)} functions)")
    if args.overhead:
        write_overhead_dirs(tree, spec, args.out)
    if args.share_payload:
        first, *rest = sorted(d for d in args.out.iterdir() if (d / "sgtrace_payload").is_dir())
        for other in rest:
            shutil.rmtree(other / "sgtrace_payload")
            (other / "sitecustomize.py").unlink()
        print(f"payload kept in {first} only")
    root = Path(
        subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    folder = carried_folder(args.out, root)
    if folder is None:
        print(f"{args.out} is not in a folder {root}/.carry/NAME: the call's size not counted")
    else:
        report_size(root, [folder, *(f.resolve() for f in args.carry_with)])


def carried_folder(out: Path, root: Path) -> Path | None:
    """The folder a device call carries that holds ``out``: ``root/.carry/NAME``, or None.

    >>> carried_folder(Path("/r/.carry/probe013/plain-check"), Path("/r"))
    PosixPath('/r/.carry/probe013')
    """
    try:
        parts = out.resolve().relative_to(root.resolve()).parts
    except ValueError:
        return None
    return root / parts[0] / parts[1] if len(parts) >= 2 and parts[0] == ".carry" else None


def write_overhead_dirs(tree, spec, out: Path) -> None:
    """``trace_only``: the tracer alone; ``hook_broken``: a deliberately broken hook (it logs
    and records its decisions but never applies them, as if the switch were forgotten: its
    switch site names a method the scheduler does not have, so the plain state is never
    captured)."""
    static = selection_from_source(Project(tree))
    shutil.rmtree(out / "trace_only", ignore_errors=True)
    prepare_trace_dir(out / "trace_only", static.selection)
    broken = out / "hook_broken"
    shutil.rmtree(broken, ignore_errors=True)
    generate_runtime_hook(tree, broken, load_policy_config(None, POLICIES["hook_bs"]), spec)
    config = json.loads((broken / "sgtrace_hook.json").read_text(encoding="utf-8"))
    names = config["plain_off_names"]
    names["switch_qualname"] = "Scheduler.sgtrace_deliberately_broken_never_switches"
    (broken / "sgtrace_hook.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    prepare_trace_dir(broken, static.selection)
    print(f"{out / 'trace_only'}, {broken}: written")


if __name__ == "__main__":
    main()
