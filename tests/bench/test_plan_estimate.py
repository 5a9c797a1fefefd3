"""A sweep plan's A/A pair, its estimated wall time, and the refusal of a plan that does not fit
(bench/live/plan_checks.py, plan_estimate.py); the crossover plans of issue 21 each fit."""

from __future__ import annotations

import itertools

import pytest
from tests.bench.test_live_sweep import LIVE, script
from tests.bench.test_sweep_plan import load, refusal

plans = script("sweep_plan")
estimates = script("plan_estimate")

SMALL = """\
[servers]
list = ["base", "base+aa", "eagle3:high"]
[load]
concurrency = [1, 64]
warmup_s = 1.0
window_s = 2.0
windows = 2
[schedule]
reps = 3
[host]
monitor = false
"""

NO_PAIR = (
    "servers.list: no A/A pair (two identical servers, e.g. 'base' and 'base+aa') to show the "
    "noise floor; add one, or say why not in servers.aa_pair_waived"
)


@pytest.mark.parametrize(
    "servers",
    [
        ["base", "eagle3:high"],
        ["base", "base@tiny", "base@tiny+t"],  # tiny servers answer greedy prompts only
        ["eagle3:high", "eagle3:low"],  # two drafts: not the same work
    ],
)
def test_a_plan_without_an_aa_pair_is_refused(tmp_path, servers):
    assert refusal(tmp_path, f"[servers]\nlist = {servers}\n") == NO_PAIR


@pytest.mark.parametrize(
    "text",
    [
        "[servers]\nlist = ['base', 'base:b']\n",  # base:X is a second no-speculation server
        "[servers]\nlist = ['eagle3:high', 'eagle3:high+2', 'base']\n",
        "[servers]\nlist = ['base', 'eagle3:high']\naa_pair_waived = 'greedy outputs only'\n",
        # profiled only: nothing is measured, so there is no floor to show
        "[servers]\nlist = ['base']\n[profile]\nservers = ['base']\nonly = ['base']\n",
    ],
)
def test_an_aa_pair_a_waiver_or_nothing_measured_passes(tmp_path, text):
    assert load(tmp_path, text).servers.list


def test_a_profiled_only_server_is_no_half_of_a_pair(tmp_path):
    text = "[servers]\nlist = ['base', 'base+aa']\n[profile]\nservers = ['base']\nonly = ['base']\n"
    assert refusal(tmp_path, text) == NO_PAIR


def test_the_estimate_adds_start_up_turns_and_pack(tmp_path):
    plan = load(tmp_path, SMALL)
    slowest = estimates.estimate(plan, estimates.SLOWEST)
    # 45 (models) + 137 (ready) + 3 x 4 (greedy) + 2 levels x 3 servers x 3 turns of
    # (1 + 2 x 2 + 0.6) s + 10 (pack); no CPU probe without the monitor
    assert slowest.total_s == pytest.approx(45 + 137 + 12 + 18 * 5.6 + 10)
    assert slowest.turn_s == pytest.approx(5.6)
    assert slowest.measured_s == 12.0  # 3 turns of 2 windows of 2 s
    typical = estimates.estimate(plan, estimates.TYPICAL)
    assert typical.total_s == pytest.approx(35 + 107 + 9 + 18 * 5.45 + 5)


def test_rounds_count_each_servers_levels_and_tiny_and_profiles_cost_their_share(tmp_path):
    text = (
        "[servers]\nlist = ['base', 'base:b', 'eagle3traced:high', 'hook@tiny']\n"
        "[load]\nconcurrency = [1, 2, 4]\nconcurrency_traced = [8]\n"
        "[schedule]\nreps = 0\nrounds = 2\nconcurrency_repeat = [4]\n"
        "[profile]\nservers = ['base']\n"
    )
    plan = load(tmp_path, text)
    # round 1: 3 + 3 levels and the traced server's 1; round 2: 1 + 1 and 1 again
    assert estimates.turns(plan)[0][1] == 10
    # 45 + 10 (tiny pair) + 10 (probe) + 137 + 4 x 4 (greedy, the tiny one too) + 10 turns
    # of (1 + 3 + 0.6) s + one profile of 1 + 16 + 8 s + 10 (pack)
    total = estimates.estimate(plan, estimates.SLOWEST).total_s
    assert total == pytest.approx(45 + 10 + 10 + 137 + 16 + 46 + 25 + 10)


def test_the_estimate_prints_each_phase_typical_and_slowest(tmp_path, capsys):
    path = tmp_path / "plan.toml"
    path.write_text(SMALL)
    assert plans.main([str(path), "--estimate"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "phase                                          typical  slowest",
        "bundle and synthetic models                         35       45",
        "3 servers started together, ready                  107      137",
        "greedy check of 3 servers                            9       12",
        "2 levels x 3 servers x 3 turns, 5.60 s each         98      101",
        "pack                                                 5       10",
        "total                                              254      305",
        "limits.deadline_s = 570: the plan fits at the slowest start-up recorded",
        "measured per server and level: 12.0 s of windows (turns x windows x window_s)",
        # 2, 4 and 8 over the square root of 3
        "a paired comparison's s.e. over 3 turns, by the spread of one turn's difference: "
        "1.2% at 2%, 2.3% at 4%, 4.6% at 8%",
    ]


def test_a_plan_that_does_not_fit_its_deadline_is_refused_but_can_be_estimated(tmp_path, capsys):
    # 45 + 137 + 12 + 18 x 5.6 + 10 = 304.8 s
    assert refusal(tmp_path, SMALL + "[limits]\ndeadline_s = 300\n") == (
        "limits.deadline_s: the plan needs 305 s at the slowest start-up recorded, more than "
        "its 300 s (sweep_plan.py PLAN --estimate); fewer levels, servers or turns, or shorter "
        "windows"
    )
    assert refusal(tmp_path, "[limits]\ndeadline_s = 595\n") == (
        "limits.deadline_s: 595 leaves no time to pack in a device call of 600 s; at most 590"
    )
    path = tmp_path / "plan.toml"
    path.write_text(SMALL + "[limits]\ndeadline_s = 300\n")
    assert plans.main([str(path), "--estimate"]) == 1
    assert "the plan does NOT fit" in capsys.readouterr().out


CROSSOVER = ("crossover.toml", "crossover-busy.toml")
DRAFTS = ("a34", "a25", "a12")  # accept lengths 3.4, 2.5, 1.2
SHAPES = ("0.0", "0.5")  # requests of one length; spread over 64-192 tokens


def crossover_run(draft: str, spread: str) -> list[str]:
    """The --set lines of one crossover run, as bench/live/README.md gives them."""
    servers = [f"{k}:{draft}" for k in ("eagle3", "eagle3", "hook", "adaptive")]
    servers[1] += "+aa"
    listed = ", ".join(f'"{s}"' for s in ["base", *servers])
    return [f"servers.list=[{listed}]", f"load.max_new_spread={spread}"]


@pytest.mark.parametrize(
    ("name", "draft", "spread"), list(itertools.product(CROSSOVER, DRAFTS, SHAPES))
)
def test_each_crossover_run_is_accepted_and_fits_one_device_call(name, draft, spread):
    path = LIVE / "plans" / name
    plan = plans.load_plan(path, crossover_run(draft, spread))
    assert estimates.fits(plan) and plan.limits.deadline_s <= 590
    assert plan.labels == (
        "base",
        f"eagle3-{draft}",
        f"eagle3-{draft}+aa",
        f"hook-{draft}",
        f"adaptive-{draft}",
    )
    assert plan.schedule.reps >= 4  # the claim rule's fewest turns


FIXED_HALVES = ("[1, 2, 4, 8, 16]", "[32, 64, 128]")
ONE_CALL = {("a34", "0.0"), ("a34", "0.5"), ("a25", "0.0")}


@pytest.mark.parametrize(("draft", "spread"), list(itertools.product(DRAFTS, SHAPES)))
def test_each_fixed_work_crossover_run_covers_1_to_128_in_one_call_or_two(draft, spread):
    """The good draft's both shapes and the fair draft's one length fit one call; every run
    fits two, levels 1-16 and 32-128 (a poorer draft's EAGLE-3 spends more plain steps a token
    at 64-128: 1.9-3.3 with the poor draft)."""
    path, run = LIVE / "plans" / "crossover-fixed.toml", crossover_run(draft, spread)
    plan = plans.load_plan(path, run, fit=False)
    assert plan.load.fixed_requests == 1 and plan.load.fixed_batch
    assert plan.load.concurrency == (1, 2, 4, 8, 16, 32, 64, 128)
    assert plan.labels[1:3] == (f"eagle3-{draft}", f"eagle3-{draft}+aa")  # the A/A pair
    assert plan.schedule.reps >= 4
    assert estimates.fits(plan) == ((draft, spread) in ONE_CALL)
    for levels in FIXED_HALVES:  # load_plan refuses a plan that does not fit
        assert estimates.fits(plans.load_plan(path, [*run, f"load.concurrency={levels}"]))


def test_a_speculating_server_is_estimated_at_its_drafts_accept_length():
    """A token of EAGLE-3 costs a draft-and-verify step over the accept length; no speculation
    and a hook held off a plain step; a hook the faster of the two; a shallower target less."""
    path = LIVE / "plans" / "crossover-fixed.toml"
    plan = plans.load_plan(path)
    costs, q = estimates.TYPICAL, plan.models.accept["a12"]
    plain = estimates.token_s(plan, costs, 64, "base")
    assert plain == pytest.approx((4.6 + 64 * 0.032) / 1000)
    assert estimates.token_s(plan, costs, 64, "plainoff") == plain
    verify = (1.45 + 64 * 0.025) * plain
    for spec in ("eagle3:a12", "adaptive:a12", "eagle3:a12+aa"):
        assert estimates.token_s(plan, costs, 64, spec) == pytest.approx(
            verify / (1 + q + q**2 + q**3)
        )
    assert estimates.token_s(plan, costs, 64, "hook:a12") == plain  # off is faster at 1.2
    good = estimates.token_s(plan, costs, 1, "hook:a34")
    assert good == estimates.token_s(plan, costs, 1, "eagle3:a34") < plain
    assert estimates.token_s(plan, costs, 64, "eagle3:nodraft") == plain  # no accept known
    shallow = plans.load_plan(path, ["models.layers=24"])
    assert estimates.token_s(shallow, costs, 64, "base") == pytest.approx(plain * 24 / 32)


def test_the_crossover_plans_cover_concurrency_1_to_128_between_them():
    levels = [plans.load_plan(LIVE / "plans" / n).load.concurrency for n in CROSSOVER]
    assert sorted(itertools.chain(*levels)) == [1, 2, 4, 8, 16, 32, 64, 128]


def test_the_crossover_drafts_are_built_for_the_accept_lengths_they_are_named_after():
    accept = plans.load_plan(LIVE / "plans" / "crossover.toml").models.accept
    for draft, length in (("a34", 3.4), ("a25", 2.5), ("a12", 1.2)):
        q = accept[draft]  # make_synth_models.py --check: 1 + q + q^2 + q^3 (3 draft steps)
        assert 1 + q + q**2 + q**3 == pytest.approx(length, abs=0.005)


def test_the_readme_gives_the_crossover_runs_as_the_tests_check_them():
    readme = (LIVE / "README.md").read_text()
    (line,) = [x for x in readme.splitlines() if x.strip().startswith('--set "servers.list=')]
    servers = line.strip().removeprefix('--set "').removesuffix('" \\').replace('\\"', '"')
    spread = next(x for x in readme.splitlines() if "--set load.max_new_spread=" in x)
    for draft, shape in itertools.product(DRAFTS, SHAPES):
        want = crossover_run(draft, shape)
        assert [servers.replace("$D", draft), spread.strip().removeprefix("--set ")] == [
            want[0],
            want[1].replace(shape, "$S"),
        ]
    assert all(f"plans/{name}" in readme or f"`{name}`" in readme for name in CROSSOVER)


PLAIN_COST = ("plain-cost.toml", "plain-cost-busy.toml")  # issue 20: the cost of off


@pytest.mark.parametrize("name", PLAIN_COST)
def test_each_plain_cost_plan_is_accepted_and_fits_one_device_call(name):
    plan = plans.load_plan(LIVE / "plans" / name)
    assert estimates.fits(plan) and plan.limits.deadline_s <= 570
    # held off in the plain state and no speculation, two servers each: both pairs are A/A
    assert plan.labels == ("base", "base+aa", "plainoff-a25", "plainoff-a25+2")
    assert plan.schedule.reps >= 4  # the claim rule's fewest turns
    assert f"plans/{name}" in (LIVE / "README.md").read_text()


def test_the_plain_cost_plans_cover_1_to_128_on_the_crossovers_models_and_load():
    crossover = plans.load_plan(LIVE / "plans" / "crossover.toml")
    loaded = [plans.load_plan(LIVE / "plans" / n) for n in PLAIN_COST]
    assert sorted(itertools.chain(*(p.load.concurrency for p in loaded))) == [
        1,
        2,
        4,
        8,
        16,
        32,
        64,
        128,
    ]
    for plan in loaded:  # the same synthetic target and drafts, requests of the same shape
        assert plan.models == crossover.models
        load, other = plan.load, crossover.load
        assert (load.max_new, load.max_new_spread, load.stream_interval, load.warmup_s) == (
            other.max_new,
            other.max_new_spread,
            other.stream_interval,
            other.warmup_s,
        )


def test_a_fixed_work_plan_is_estimated_level_by_level(tmp_path):
    text = SMALL.replace("windows = 2\n", "windows = 2\nfixed_requests = 2\nmax_new = 100\n")
    plan = load(tmp_path, text)
    slowest = estimates.estimate(plan, estimates.SLOWEST)
    levels = [p for p in slowest.phases if p.name.startswith("level ")]
    assert [p.name.split(":")[0] for p in levels] == ["level 1", "level 64"]
    # a turn: warm-up wave (a prefill of 0.1 s + C x 4 ms, then 4 tokens) + 2 requests of that
    # prefill + 100 tokens, + 0.5 s; a token (6 + C x 0.05) ms on base and base+aa, on
    # eagle3:high (q 0.9) a step of (1.6 + C x 0.0275) of those over 1 + q + q^2 + q^3 tokens;
    # 3 turns of each server a level
    accept = 1 + 0.9 + 0.9**2 + 0.9**3
    for phase, conc in zip(levels, (1, 64), strict=True):
        plain, prefill = (6.0 + conc * 0.05) / 1000, 0.1 + conc * 0.004
        spec = plain * (1.6 + conc * 0.0275) / accept
        turns = [(prefill + 4 * t) + 2 * (prefill + 100 * t) + 0.5 for t in (plain, plain, spec)]
        assert phase.seconds == pytest.approx(3 * sum(turns))
    assert slowest.total_s == pytest.approx(45 + 137 + 12 + sum(p.seconds for p in levels) + 10)
    assert "fixed work" in estimates.render_estimate(plan)


def test_the_fixed_cost_plan_fits_its_call():
    plan = plans.load_plan(LIVE / "plans" / "plain-cost-fixed.toml")
    assert plan.load.fixed_requests == 1 and estimates.fits(plan)


def test_the_load_py_plan_sends_load_pys_levels_and_fits_one_call():
    """loadpy-levels.toml: C clients of two 64-token requests each, every request its own call
    (load.py's 128 requests at 64), the hook's defaults beside both references and an A/A pair."""
    plan = plans.load_plan(LIVE / "plans" / "loadpy-levels.toml")
    assert estimates.fits(plan) and plan.schedule.reps >= 4
    load_ = plan.load
    assert (load_.fixed_requests, load_.fixed_batch, load_.max_new) == (2, False, 64)
    assert load_.max_new_spread == 0.0 and {1, 8, 64} <= set(load_.concurrency)
    assert plan.labels == ("base", "eagle3-a25", "eagle3-a25+aa", "hook-a25")
    assert "plans/loadpy-levels.toml" in (LIVE / "README.md").read_text()


def test_fixed_tokens_add_requests_to_the_turns_of_the_low_levels(tmp_path):
    base = SMALL.replace("windows = 2\n", "windows = 2\nfixed_requests = 1\nmax_new = 128\n")
    short = estimates.estimate(load(tmp_path, base), estimates.SLOWEST)
    long = estimates.estimate(
        load(tmp_path, base.replace("max_new = 128\n", "max_new = 128\nfixed_tokens = 512\n")),
        estimates.SLOWEST,
    )
    (one, sixty_four), (one_long, sixty_four_long) = (
        [p.seconds for p in e.phases if p.name.startswith("level ")] for e in (short, long)
    )
    assert sixty_four_long == sixty_four  # 64 x 128 tokens: one request already
    plan = load(tmp_path, base)  # four requests at one, three of them added
    added = sum(
        3 * estimates.request_s(plan, estimates.SLOWEST, 1, 128, spec) for spec in plan.servers.list
    )
    assert one_long == pytest.approx(one + 3 * added)  # three turns of each server


def test_a_spread_wave_lasts_its_expected_longest_request(tmp_path):
    """One request's wave lasts its own length (on average max_new); C requests' the largest of
    C lengths drawn over 0.5-1.5 x max_new: 1.5 - 1 / (C + 1) times max_new."""
    base = SMALL.replace("windows = 2\n", "windows = 2\nfixed_requests = 1\nmax_new = 128\n")
    one = load(tmp_path, base)
    spread = load(
        tmp_path, base.replace("max_new = 128\n", "max_new = 128\nmax_new_spread = 0.5\n")
    )
    costs = estimates.TYPICAL
    assert estimates.fixed_turn_s(spread, costs, 1) == pytest.approx(
        estimates.fixed_turn_s(one, costs, 1)
    )
    wave = estimates.request_s(one, costs, 64, 128 * (1.5 - 1 / 65))
    warm = estimates.request_s(one, costs, 64, 4)
    assert estimates.fixed_turn_s(spread, costs, 64) == pytest.approx(
        warm + wave + costs.fixed_overhead_s
    )
