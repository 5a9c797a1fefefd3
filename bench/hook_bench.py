"""Benchmark the speculation hook's own cost per decode step, in SGLang's scheduler process.

Every decode result goes through the hook's ``on_decode_result``: the accept lengths are read,
the policy decides, the decision is recorded. That host time is paid once per step on every TP
rank; where a step is short (one request: 4.7 ms on the live benchmark's 7B target) and the host
is the bottleneck, it is part of what speculation off costs against no speculation at all. This
benchmark times that call alone, in this process, with the shipped modules
(``sgtrace.payload``, which the hook directory holds as ``sgtrace_payload``),
for each policy (``batch-size``, ``default``, ``measure``), batch size and state (on: a verify
of 4 tokens per request, 3.4 accepted on average; off: a plain decode's results, no accept
lengths).
The result's accept lengths are a Python list here (SGLang's are a CPU tensor: ``tolist()``
adds its own cost, the same for any hook reading them).

Times are CPU time (``time.process_time_ns``) per call: the fastest of ``--repeats`` rounds of
``--calls`` calls. Results go to ``bench/results/hook.md`` and ``hook.csv``::

    python bench/hook_bench.py [--calls 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import csv
import platform
import sys
import time
from pathlib import Path

from sgtrace.payload.config import Delivery, HookConfig, HookOptions, SiteRef
from sgtrace.payload.hook import Hook
from sgtrace.payload.policy import PRESETS, PolicyConfig
from sgtrace.sglang.plain_names import plain_off_names
from sgtrace.sglang.runtime_names import runtime_names

ROOT = Path(__file__).resolve().parents[1]
POLICIES = {
    "batch-size": PolicyConfig.from_dict(PRESETS["batch-size"]),
    "threshold": PolicyConfig.from_dict(PRESETS["threshold"]),
    "default (calibrated)": PolicyConfig(),
    "measure": PolicyConfig(measure=True),
}
BATCH_SIZES = (1, 16, 64, 128)


class _Spec:
    def is_none(self) -> bool:
        return False


class _Batch:
    def __init__(self, size: int) -> None:
        self.reqs = [object()] * size
        self.spec_algorithm = _Spec()
        self.forward_iter = 0


class _Result:
    def __init__(self, size: int, on: bool) -> None:
        self.speculative_num_draft_tokens = 4 if on else None
        # 3.4 tokens a verify on average: 4, 4, 3, 4, 3, 3, 4, 4, 3, 2, ...; a plain decode: none
        self.accept_lens = (
            [(4, 4, 3, 4, 3, 3, 4, 4, 3, 2)[i % 10] for i in range(size)] if on else None
        )


def per_call_ns(policy: PolicyConfig, size: int, on: bool, calls: int, repeats: int) -> float:
    """CPU nanoseconds per ``on_decode_result`` call, the fastest of ``repeats`` rounds."""
    return _fastest_ns(policy, [size] * calls, on, repeats)


def wave_sizes(calls: int) -> list[int]:
    """A spread wave's batch sizes, again and again: 16 requests finishing one every 8 steps
    down to 2 over 120 steps, so the calibrated policy holds a window in each of five buckets
    (live, a server's windows span its levels: its predictions read them all)."""
    return [max(1, 16 - (i % 120) // 8) for i in range(calls)]


def per_call_wave_ns(policy: PolicyConfig, calls: int, repeats: int) -> float:
    """CPU nanoseconds per ``on_decode_result`` call over :func:`wave_sizes`, speculation on."""
    return _fastest_ns(policy, wave_sizes(calls), True, repeats)


def _fastest_ns(policy: PolicyConfig, sizes: list[int], on: bool, repeats: int) -> float:
    """CPU nanoseconds per call of a hook fed results of ``sizes`` in turn, the fastest of
    ``repeats`` rounds, each on a fresh hook."""
    batches = {n: _Batch(n) for n in set(sizes)}
    results = {n: _Result(n, on) for n in set(sizes)}
    best = float("inf")
    for _ in range(repeats):
        hook = Hook(bench_config(policy))
        hook.worker = object()  # attached: decisions are taken (no off state: nothing applied)
        start = time.process_time_ns()
        for i, n in enumerate(sizes):
            batches[n].forward_iter = i
            hook.on_decode_result(batches[n], results[n])
        best = min(best, (time.process_time_ns() - start) / len(sizes))
        if hook.step != len(sizes) or hook.failed:  # every call must have reached the policy
            raise SystemExit(
                f"the hook decided {hook.step} of {len(sizes)} calls (failed: {hook.failed})"
            )
    return best


def bench_config(policy: PolicyConfig) -> HookConfig:
    """A hook config with ``policy`` and sites that are never imported here."""
    site = SiteRef("bench_hook_never_imported", "Site.call")
    return HookConfig(
        source="bench",
        decide=site,
        attach=site,
        delivery=Delivery.PATCH,
        policy=policy,
        options=HookOptions(),
        names=runtime_names(),
        plain_names=plain_off_names(),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    rows = []
    for name, policy in POLICIES.items():
        for size in BATCH_SIZES:
            for on in (True, False):
                ns = per_call_ns(policy, size, on, args.calls, args.repeats)
                rows.append(
                    {
                        "policy": name,
                        "batch_size": size,
                        "state": "on" if on else "off",
                        "us_per_call": round(ns / 1000, 2),
                    }
                )
                print(rows[-1], flush=True)
        ns = per_call_wave_ns(policy, args.calls, args.repeats)
        rows.append(
            {
                "policy": name,
                "batch_size": "wave",
                "state": "on",
                "us_per_call": round(ns / 1000, 2),
            }
        )
        print(rows[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "hook.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "# The hook's cost per decode step (`bench/hook_bench.py`)",
        "",
        f"CPU microseconds per `on_decode_result` call, fastest of {args.repeats} rounds of "
        f"{args.calls} calls; Python {platform.python_version()} on {platform.machine()} "
        f"({platform.processor() or 'cpu'}), {sys.platform}.",
        "",
        "| policy | state | " + " | ".join(f"batch {n}" for n in BATCH_SIZES) + " |",
        "| --- | --- |" + " ---: |" * len(BATCH_SIZES),
    ]
    fixed = [r for r in rows if r["batch_size"] != "wave"]
    for name in POLICIES:
        for state in ("on", "off"):
            cells = [r["us_per_call"] for r in fixed if r["policy"] == name and r["state"] == state]
            lines.append(f"| {name} | {state} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    lines += [
        "",
        "A spread wave, speculation on (`wave_sizes`: 16 requests finishing down to 2, again and "
        "again; a window in each of five buckets):",
        "",
        "| policy | us per call |",
        "| --- | ---: |",
        *(f"| {r['policy']} | {r['us_per_call']:.1f} |" for r in rows if r["batch_size"] == "wave"),
    ]
    (args.out / "hook.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
