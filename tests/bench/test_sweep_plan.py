"""bench/live/sweep_plan.py: a sweep plan's schema, its defaults, and the one-line refusals."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from tests.bench.test_live_sweep import script

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TOML = ROOT / "bench" / "live" / "plans" / "default.toml"

plans = script("sweep_plan")


def load(tmp_path: Path, text: str, *overrides: str):
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return plans.load_plan(path, list(overrides))


def refusal(tmp_path: Path, text: str, *overrides: str) -> str:
    with pytest.raises(plans.PlanError) as caught:
        load(tmp_path, text, *overrides)
    return str(caught.value).removeprefix(f"{tmp_path / 'plan.toml'}: ")


def test_the_default_plan_file_is_the_schemas_defaults():
    assert plans.load_plan(DEFAULT_TOML) == plans.DEFAULTS


def test_an_empty_plan_takes_every_default(tmp_path):
    assert load(tmp_path, "") == plans.DEFAULTS


def test_given_keys_replace_defaults_and_the_rest_stay(tmp_path):
    plan = load(tmp_path, "[load]\nconcurrency = [1, 64]\nwindow_s = 3\n[schedule]\nreps = 4\n")
    assert plan.load == dataclasses.replace(plans.DEFAULTS.load, concurrency=(1, 64), window_s=3.0)
    assert plan.schedule == plans.Schedule(reps=4)
    assert plan.servers == plans.DEFAULTS.servers


def test_resolved_values_fill_empty_levels_and_give_reps_precedence(tmp_path):
    plan = load(tmp_path, "[load]\nconcurrency = [1, 64]\n[schedule]\nrounds = 3\nreps = 2\n")
    env = plans.shell_env(plan)
    assert (env["CONC"], env["CONC_TRACED"], env["CONC_REPEAT"]) == ("1,64",) * 3
    assert (env["ROUNDS"], env["REPS"]) == ("1", "2")  # the turns are taken at each level
    assert (env["PIN"], env["MONITOR"], env["ACCEPT"]) == ("0", "1", "high=0.9 low=0.17")


def test_print_env_is_shell_that_bash_reads_back(tmp_path, capsys):
    path = tmp_path / "plan.toml"
    path.write_text('[load]\ntag = "it\'s a tag"\n')
    assert plans.main([str(path), "--print-env"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "TAG='it'\"'\"'s a tag'" in lines
    assert len(lines) == len(plans.shell_env(plans.DEFAULTS))


def test_set_overrides_one_key_with_a_toml_value(tmp_path):
    plan = load(tmp_path, "", 'servers.list=["hook:low", "hook:low+2"]', "host.pin=gpu")
    assert plan.labels == ("hook-low", "hook-low+2")
    assert plan.host.pin == "gpu"


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [
        ("[lod]\n", (), "lod: unknown section; did you mean 'load'?"),
        ("[load]\nwindow = 2\n", (), "load.window: unknown key; did you mean 'windows'?"),
        ("[load]\nwindows = 'two'\n", (), "load.windows: expected int, got 'two'"),
        ("[load]\nwindows = true\n", (), "load.windows: expected int, got True"),
        ("[load]\nconcurrency = 8\n", (), "load.concurrency: expected a list, got 8"),
        ("[load]\nconcurrency = [8, 'x']\n", (), "load.concurrency[1]: expected int, got 'x'"),
        ("[load]\nconcurrency = [0]\n", (), "load.concurrency: levels are numbers of concurrent requests, at least 1"),
        ("[host]\nmonitor = 1\n", (), "host.monitor: expected bool, got 1"),
        ("[host]\npin = 'numa'\n", (), "host.pin: 'numa'; one of none, each, gpu"),
        ("[models]\naccept = { high = 1.5, low = 0.2 }\n", (), "models.accept.high: 1.5 is a fraction of the vocabulary, 0 to 1"),
        ("[servers]\nlist = ['eagel3:high']\n", (), "servers.list: 'eagel3:high': unknown kind 'eagel3'; did you mean 'eagle3'?"),
        ("[servers]\nlist = ['eagle3:mid']\n", (), "servers.list: 'eagle3:mid' needs a draft of models.accept (high, low), written eagle3:DRAFT"),
        ("[servers]\nlist = ['base', 'base']\n", (), "servers.list: two servers have the same label; add +R to the replica"),
        ("[servers]\nlist = ['base x']\n", (), "servers.list: 'base x' is not KIND[:DRAFT][@tiny][+R]"),
        ("[servers]\nlist = []\n", (), "servers.list: empty; name at least one server"),
        ("[servers]\nmax_synthetic = 1\n", (), "servers.list: 3 synthetic 7B servers do not fit on one GPU together (servers.max_synthetic = 1); split them over two plans"),
        ("[profile]\nservers = ['eagle3']\n", (), "profile.servers: 'eagle3' is not a server label; labels: base, base+aa, eagle3-high"),
        ("[profile]\nonly = ['base']\n", (), "profile.only: 'base' is neither swept nor profiled; add it to profile.servers"),
        ("[schedule]\nrounds = 0\n", (), "schedule.rounds: 0 is below 1"),
        ("[load]\nfixed_tokens = 512\n", (), "load.fixed_tokens: it lengthens fixed-work turns; set load.fixed_requests above 0 (fixed work) or fixed_tokens to 0"),
        ("[load]\nfixed_requests = 1\nfixed_tokens = -1\n", (), "load.fixed_tokens: -1 is below 0"),
        ("", ("load.windows",), "--set 'load.windows': expected SECTION.KEY=VALUE, e.g. load.windows=3"),
    ],
)  # fmt: skip
def test_a_plan_that_cannot_run_is_refused_with_the_key_named(tmp_path, text, overrides, message):
    assert refusal(tmp_path, text, *overrides) == message


def test_tiny_servers_need_no_draft_and_do_not_count_against_the_gpu(tmp_path):
    plan = load(
        tmp_path,
        "[servers]\nlist = ['base', 'plainoff@tiny']\nmax_synthetic = 1\naa_pair_waived = 'x'\n",
    )
    assert plan.labels == ("base", "plainoff-tiny")


def test_a_missing_or_broken_file_is_one_line(tmp_path):
    with pytest.raises(plans.PlanError, match=r"nothing\.toml: cannot read the plan"):
        plans.load_plan(tmp_path / "nothing.toml")
    assert refusal(tmp_path, "[load\n").startswith("not TOML: ")


def test_the_resolved_plan_prints_as_toml_that_loads_to_the_same_plan(tmp_path):
    plan = load(
        tmp_path,
        "[servers]\nlist = ['base', 'base+aa', 'hook:high']\n[profile]\nservers = ['base']\n"
        "[load]\nconcurrency = [1, 64]\n",
    )
    assert load(tmp_path, plans.render_toml(plan)) == plan
