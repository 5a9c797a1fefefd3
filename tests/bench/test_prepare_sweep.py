"""bench/live/prepare_sweep.py --only: the directories one device call carries, and no others
(the call carries 64 MiB in all; the recipe's bundle takes about 50)."""

from __future__ import annotations

import pytest
from tests.bench.test_live_sweep import script

prepare = script("prepare_sweep")


@pytest.mark.network
def test_only_the_named_directories_are_written_and_a_misspelt_one_is_refused(
    tmp_path, sglang_source
):
    from sgtrace.hooks.policy_config import load_policy_config

    tree, policy = sglang_source("0.5.16"), load_policy_config(None)
    (tmp_path / "hook").mkdir()  # written by an earlier run: left as it is
    written = prepare.write_dirs(tree, policy, tmp_path, only=("plainoff", "traced"))
    assert [p.name for p in written] == ["traced", "plainoff"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hook", "plainoff", "traced"]
    with pytest.raises(SystemExit, match="^--only plainof: no such directory; did you mean "):
        prepare.write_dirs(tree, policy, tmp_path, only=("plainof",))
    with pytest.raises(SystemExit, match="^--only hookoff: no such directory"):  # the zero-step
        prepare.write_dirs(tree, policy, tmp_path, only=("hookoff",))  # kind is gone
