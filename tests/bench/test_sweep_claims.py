"""The live benchmark's statistics (bench/live/sweep_stats.py, sweep_claims.py): paired
comparisons over turns, pooling over calls, the A/A noise floor and the SHOWN / REFUTED /
UNDECIDED rule of a claim. Every expected value is worked out by hand in the comments."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.bench.test_live_sweep import script

stats = script("sweep_stats")
claims = script("sweep_claims")
# the classes claims builds (its own import of sweep_stats), for comparisons with its results
Paired, Floor, Verdict = claims.Paired, claims.Floor, claims.Verdict
RULE = claims.ClaimRule()  # 0.97x, s.e. at most 1%, from 4 turns or more


def turn(label: str, conc: int, rep: int, windows: list[float]) -> dict:
    """One server's turn at a level, as sweep_load.py --targets --reps writes it."""
    return {
        "label": label,
        "concurrency": conc,
        "tag": "turns",
        "rep": rep,
        "window_tok_per_s": windows,
        "requests": 1,
        "errors": 0,
        "tokens_per_verify": None,
    }


def level(label: str, conc: int, turns: list[list[float]]) -> dict:
    return stats.merged([turn(label, conc, rep, w) for rep, w in enumerate(turns, 1)])


def test_the_paired_comparison_averages_a_turns_windows_and_pairs_whole_turns():
    hook = level("hook", 8, [[980.0, 1000.0], [720.0, 760.0], [1010.0, 1010.0]])
    base = level("base", 8, [[1000.0, 1000.0], [800.0, 800.0], [1000.0, 1000.0]])
    # turn means 990, 740, 1010 against 1000, 800, 1000: -1%, -7.5%, +1%; mean -2.5%;
    # deviations 1.5, -5, 3.5: sample variance 39.5 / 2 = 19.75; s.e. sqrt(19.75 / 3)
    p = stats.paired_turns(hook, base)
    assert (p.pct, p.se_pct, p.turns) == (
        pytest.approx(-2.5),
        pytest.approx((19.75 / 3) ** 0.5),
        3,
    )
    assert stats.paired(hook, base) == (-2.5, 2.6)
    # one turn in common: a difference, no standard error
    once = level("x", 8, [[990.0]])
    assert stats.paired_turns(once, base) == stats.Paired(pytest.approx(-1.0), None, 1)
    assert stats.paired(once, base) == (None, None)


def test_a_drift_of_the_machine_falls_on_both_servers_of_a_turn_alike():
    # the machine slowed by a quarter in turn 2: both servers alike, the hook 2% behind in both
    best = level("base", 8, [[1000.0, 1000.0], [750.0, 750.0]])
    hook = level("hookcold-high", 8, [[980.0, 980.0], [735.0, 735.0]])
    assert stats.paired(hook, best) == (-2.0, 0.0)
    # unpaired, the drift is noise: a standard error of 7% on each mean
    assert hook["se_pct"] > 7 and best["se_pct"] > 7
    # no turns in common: nothing to pair
    assert stats.paired(hook, stats.merged([turn("x", 8, 3, [1.0, 1.0])])) == (None, None)


def test_calls_pool_by_inverse_variance_and_parts_without_an_error_are_left_out():
    # weights 1/4 and 1: (-4/4 + 2) / 1.25 = 0.8; s.e. 1 / sqrt(1.25)
    one = stats.Paired
    both = stats.pool([one(-4.0, 2.0, 3), one(2.0, 1.0, 4), one(9.0, None, 1)])
    assert both == one(pytest.approx(0.8), pytest.approx(1.25**-0.5), 7)
    assert stats.pool([one(9.0, None, 1)]) is None


QUIET = Floor("c1", "base+aa", "base", 8, Paired(0.5, 0.3, 4))


@pytest.mark.parametrize(
    ("measured", "floors", "verdict", "reason"),
    [
        (Paired(-2.9, 1.0, 4), [QUIET], Verdict.SHOWN, ""),  # an s.e. of 1% counts
        (Paired(-3.0, 0.5, 6), [QUIET], Verdict.SHOWN, ""),  # exactly 0.97x
        (Paired(-3.1, 0.5, 6), [QUIET], Verdict.REFUTED, ""),
        (Paired(5.0, 1.1, 6), [QUIET], Verdict.UNDECIDED, "s.e. 1.10% > 1.0%"),
        (Paired(0.0, 0.2, 3), [QUIET], Verdict.UNDECIDED, "3 turns paired, fewer than 4"),
        (None, [QUIET], Verdict.UNDECIDED, "0 turns paired, fewer than 4"),
        (Paired(0.0, 0.2, 4), [], Verdict.UNDECIDED, "no A/A pair at this level: the floor is unknown"),
        (
            Paired(0.0, 0.2, 4),
            [Floor("c1", "base+aa", "base", 8, Paired(1.5, 0.5, 6))],  # 1.5 > 1 and > 2 x 0.5
            Verdict.UNDECIDED,
            "A/A floor above 1.0%: base+aa vs base +1.5% ± 0.5% (6 turns)",
        ),
        (  # 0.9 ± 0.1: beyond two standard errors, but within 1%
            Paired(-3.5, 0.2, 4),
            [Floor("c1", "base+aa", "base", 8, Paired(0.9, 0.1, 6))],
            Verdict.REFUTED,
            "",
        ),
        (  # 1.5 ± 0.8: within two of its standard errors of zero, not a floor above 1%
            Paired(-3.5, 0.2, 4),
            [Floor("c1", "base+aa", "base", 8, Paired(1.5, 0.8, 6))],
            Verdict.REFUTED,
            "",
        ),
    ],
)  # fmt: skip
def test_a_claim_counts_only_with_an_se_of_at_most_one_percent_and_a_quiet_floor(
    measured, floors, verdict, reason
):
    assert claims.judge(measured, floors, RULE) == (verdict, reason)


def write_call(run: Path, servers: dict[str, dict[int, list[float]]]) -> None:
    """A call's sweep.jsonl: each server's one-window turns at each level."""
    run.mkdir()
    lines = [
        turn(label, conc, rep, [rate])
        for label, by_level in servers.items()
        for conc, rates in by_level.items()
        for rep, rate in enumerate(rates, 1)
    ]
    (run / "sweep.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_the_report_prints_each_claim_its_error_its_floor_and_its_verdict(
    tmp_path, capsys, monkeypatch
):
    report = script("sweep_report")
    write_call(
        tmp_path / "c1",
        {
            "base": {8: [1000.0] * 4, 64: [3000.0] * 4},
            # +1, 0, +1, 0 %: mean 0.5, sd sqrt(1 / 3), s.e. 0.289; at 64 identical
            "base+aa": {8: [1010.0, 1000.0, 1010.0, 1000.0], 64: [3000.0] * 4},
            "eagle3-x": {8: [2000.0] * 4, 64: [2400.0] * 4},
            # against EAGLE-3 (the better at 8): -2, -1, -3, -2 %: mean -2, s.e. sqrt(2/3) / 2
            # against base (the better at 64): -5, -4, -6, -5 %: mean -5, the same s.e.
            "cal-x": {8: [1960.0, 1980.0, 1940.0, 1960.0], 64: [2850.0, 2880.0, 2820.0, 2850.0]},
            "adaptive-x": {8: [1800.0] * 4, 64: [1500.0] * 4},
        },
    )  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path / "c1")])
    report.main()
    text = capsys.readouterr().out
    start = text.index("Noise floor")
    assert text[start:].rstrip().splitlines() == [
        "Noise floor: two identical servers (A/A pairs), paired over turns (± 1 s.e.):",
        "",
        "| call | server | against | c=8 | c=64 |",
        "| --- | --- | --- | ---: | ---: |",
        "| c1 | base+aa | base | +0.5% ± 0.3% (4 turns) | +0.0% ± 0.0% (4 turns) |",
        "",
        "Claims: the hook >= 0.97x the better of no speculation and EAGLE-3, paired over turns "
        "(± 1 s.e.); it counts where the s.e. is at most 1% from 4 turns or more and the level's "
        "A/A floor is within 1%.",
        "",
        "| call | server | c | against | ratio | server vs against | adaptive vs against "
        "| A/A floor | verdict |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | --- | --- |",
        "| c1 | cal-x | 8 | eagle3-x | 0.980x | -2.0% ± 0.4% (4 turns) "
        "| -10.0% ± 0.0% (4 turns) | base+aa vs base +0.5% ± 0.3% (4 turns) | SHOWN |",
        "| c1 | cal-x | 64 | base | 0.950x | -5.0% ± 0.4% (4 turns) "
        "| -50.0% ± 0.0% (4 turns) | base+aa vs base +0.0% ± 0.0% (4 turns) | REFUTED |",
        "",
        "SHOWN 1, REFUTED 1, UNDECIDED 0 of 2",
    ]


def test_pooled_replicas_keep_their_turns_and_are_paired_turn_by_turn(tmp_path):
    report = script("sweep_report")
    write_call(
        tmp_path / "c1",
        {
            "base": {8: [1000.0] * 4},
            "base+aa": {8: [1000.0] * 4},
            "hookcold-x": {8: [990.0, 980.0, 990.0, 980.0]},  # -1, -2, -1, -2 % alone
            "hookcold-x+2": {8: [970.0, 980.0, 970.0, 980.0]},
        },
    )
    rows, _ = report.load([tmp_path / "c1"])
    floors = claims.aa_floors(rows)
    (alone,) = claims.claims(rows, floors, claims.HOOK_CLAIM)
    # alone: mean -1.5, sd sqrt(4 x 0.25 / 3), s.e. that over 2
    assert (alone.paired.pct, alone.paired.se_pct) == (
        pytest.approx(-1.5),
        pytest.approx((1 / 3) ** 0.5 / 2),
    )
    # pooled: 980 in every turn, -2% four times; the floors were taken before pooling
    (both,) = claims.claims(report.pooled(rows), floors, claims.HOOK_CLAIM)
    assert (both.paired.pct, both.paired.se_pct, both.paired.turns) == (
        pytest.approx(-2.0),
        pytest.approx(0.0, abs=1e-12),
        4,
    )
    assert [(f.server, f.against) for f in both.floors] == [
        ("base+aa", "base"),
        ("hookcold-x+2", "hookcold-x"),
    ]
    assert (both.against, both.verdict) == ("base", Verdict.SHOWN)


def claim(call: str, pct: float, se: float, floor: Paired) -> object:
    level_floor = Floor(call, "base+aa", "base", 8, floor)
    return claims.Claim(
        call, "hook-x", 8, "base", Paired(pct, se, 4), None, (level_floor,), Verdict.SHOWN, ""
    )


def test_claims_pool_over_calls_of_one_load_shape_with_their_floors():
    found = [
        claim("c1", -2.0, 0.4, Paired(0.5, 0.5, 4)),
        claim("c2", -4.0, 0.8, Paired(-0.5, 0.5, 4)),
        claim("c3", -9.0, 0.1, Paired(0.0, 0.5, 4)),  # requests of spread lengths: apart
    ]
    (both,) = claims.pooled_claims(found, {"c1": 0.0, "c2": 0.0, "c3": 0.5}, RULE)
    # weights 1/0.16 = 6.25 and 1/0.64 = 1.5625: (-12.5 - 6.25) / 7.8125 = -2.4;
    # s.e. 7.8125 ** -0.5 = 0.358; the floors (equal weights): 0.0 ± 0.5 / sqrt(2)
    assert (both.call, both.server, both.paired) == (
        "c1+c2",
        "hook-x",
        Paired(pytest.approx(-2.4), pytest.approx(7.8125**-0.5), 8),
    )
    (floor,) = both.floors
    assert floor.paired == Paired(pytest.approx(0.0), pytest.approx(0.5 / 2**0.5), 8)
    assert (both.verdict, both.reason) == (Verdict.SHOWN, "")


def test_the_report_prints_the_cost_of_off_as_a_ratio_with_its_error_and_floors(
    tmp_path, capsys, monkeypatch
):
    report = script("sweep_report")
    write_call(
        tmp_path / "c1",
        {
            "base": {8: [1000.0] * 4, 64: [3000.0] * 4},
            # +1.2, -0.4, +1.2, -0.4 %: mean 0.4, sd sqrt(4 x 0.64 / 3), s.e. that over 2: 0.46
            "base+aa": {8: [1012.0, 996.0, 1012.0, 996.0], 64: [3000.0] * 4},
            # -0.4, -1.0 % twice: mean -0.7 (0.993x), sd sqrt(4 x 0.09 / 3), s.e. 0.17
            # at 64: -1.7, +2, -3, +3 %: mean 0.075 (1.001x), sd sqrt(24.8675 / 3), s.e. 1.44
            "plainoff-a25": {8: [996.0, 990.0, 996.0, 990.0], 64: [2949.0, 3060.0, 2910.0, 3090.0]},
            "plainoff-a25+2": {8: [996.0, 990.0, 996.0, 990.0], 64: [2949.0, 3060.0, 2910.0, 3090.0]},
            # -1.4, -2.0 % twice: mean -1.7 (0.983x), s.e. 0.17; not run at 64
            "hookoff-a25": {8: [986.0, 980.0, 986.0, 980.0]},
        },
    )  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path / "c1")])
    report.main()
    text = capsys.readouterr().out
    floors_8 = (
        "base+aa vs base +0.4% ± 0.5% (4 turns); plainoff-a25+2 vs plainoff-a25 +0.0% ± 0.0% "
        "(4 turns)"
    )
    floors_64 = (
        "base+aa vs base +0.0% ± 0.0% (4 turns); plainoff-a25+2 vs plainoff-a25 +0.0% ± 0.0% "
        "(4 turns)"
    )
    assert text[text.index("Noise floor") :].rstrip().splitlines() == [
        "Noise floor: two identical servers (A/A pairs), paired over turns (± 1 s.e.):",
        "",
        "| call | server | against | c=8 | c=64 |",
        "| --- | --- | --- | ---: | ---: |",
        "| c1 | base+aa | base | +0.4% ± 0.5% (4 turns) | +0.0% ± 0.0% (4 turns) |",
        "| c1 | plainoff-a25+2 | plainoff-a25 | +0.0% ± 0.0% (4 turns) | +0.0% ± 0.0% (4 turns) |",
        "",
        "Cost of off: the hook held off >= 0.99x no speculation, paired over turns (± 1 s.e.); "
        "it counts where the s.e. is at most 1% from 4 turns or more and the level's A/A floor "
        "is within 1%.",
        "",
        "| call | server | c | against | ratio | server vs against | A/A floor | verdict |",
        "| --- | --- | ---: | --- | ---: | ---: | --- | --- |",
        f"| c1 | hookoff-a25 | 8 | base | 0.983x | -1.7% ± 0.2% (4 turns) | {floors_8} | REFUTED |",
        f"| c1 | plainoff-a25 | 8 | base | 0.993x | -0.7% ± 0.2% (4 turns) | {floors_8} | SHOWN |",
        f"| c1 | plainoff-a25 | 64 | base | 1.001x | +0.1% ± 1.4% (4 turns) | {floors_64} "
        "| UNDECIDED (s.e. 1.44% > 1.0%) |",
        "",
        "SHOWN 1, REFUTED 1, UNDECIDED 1 of 3",
    ]
    # --off-ratio moves the bar: -1.7% holds 0.98x
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path / "c1"), "--off-ratio", "0.98"])
    report.main()
    hookoff = [
        x for x in capsys.readouterr().out.splitlines() if x.startswith("| c1 | hookoff-a25 | 8 |")
    ]
    assert hookoff == [
        f"| c1 | hookoff-a25 | 8 | base | 0.983x | -1.7% ± 0.2% (4 turns) | {floors_8} | SHOWN |"
    ]
