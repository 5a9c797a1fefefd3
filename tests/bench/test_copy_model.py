"""bench/live/make_copy_model.py's lag draft (make_copy_draft.py), built small on the CPU: its
check passes where the draft's lag and the target's offset agree (D = L + 1), predicts the
accept length and a cold start's wrong first proposals; a mismatched pair fails the check, and
the builder refuses one. Needs torch and safetensors (skipped without)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.bench.test_live_sweep import script

LIVE = Path(__file__).resolve().parents[2] / "bench" / "live"
SMALL = ["--hidden", "256", "--inter", "256", "--heads", "2", "--kv-heads", "1", "--vocab", "1024"]


def build(out: Path, *options: str) -> subprocess.CompletedProcess:
    pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    return subprocess.run(
        [sys.executable, str(LIVE / "make_copy_model.py"), str(out), *SMALL, *options],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_lag_draft_reads_its_own_kv(tmp_path):
    done = build(tmp_path, "--draft-lag", "8", "--check")
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads((tmp_path / "models.json").read_text())
    assert (info["offset"], info["draft_lag"], info["rule"]) == (
        9,
        8,
        "next = seq[-9] + 1 (mod 1024)",
    )
    assert info["check"]["wrong"] == 0  # the target's copy at offset 9
    draft = info["draft_check"]
    assert draft["mechanism_wrong"] == 0  # every proposal is tau's read-out of the KV 8 back
    assert draft["first_right"] == pytest.approx(draft["known_fraction"], abs=0.05)
    assert draft["accept_length_checked"] == pytest.approx(
        draft["accept_length_expected"], abs=0.15
    )
    assert draft["cold_first_wrong"] >= 0.95 and draft["cold_zeroed_first_wrong"] >= 0.95
    assert 0.3 <= draft["stale_twin_first_wrong"] <= 0.7  # a tie between two keys
    config = json.loads((tmp_path / "draft" / "config.json").read_text())
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (2, 2)
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]


def test_a_lag_without_its_offset_is_refused(tmp_path):
    done = build(tmp_path, "--draft-lag", "8", "--offset", "5")
    assert done.returncode == 2 and "--draft-lag 8 needs --offset 9, not 5" in done.stderr
    assert not (tmp_path / "models.json").exists()


def test_a_mismatched_pair_fails_the_check():
    pytest.importorskip("torch")
    draft, synth = script("make_copy_draft"), script("make_synth_models")
    import torch

    a = argparse.Namespace(hidden=256, inter=256, heads=2, kv_heads=1, vocab=1024, offset=9,
                           draft_lag=8, known=1.0, max_len=1024, seed=0)  # fmt: skip
    gen = torch.Generator().manual_seed(0)
    emb, _, _ = synth.fourier_embeddings(a.vocab, a.hidden, gen, "cpu", pairs=63)
    tau = torch.arange(a.vocab)  # every token known
    right = draft.check(a, emb, draft.weights(a, emb, tau), tau, sequences=2, length=96)
    assert right["mechanism_wrong"] == 0 and right["accept_length_checked"] == 4.0
    lag7 = draft.weights(argparse.Namespace(**{**vars(a), "draft_lag": 7}), emb, tau)
    wrong = draft.check(a, emb, lag7, tau, sequences=2, length=96)  # reads x[m-6]: D = 8
    assert wrong["mechanism_wrong"] > 0 and wrong["first_right"] < 0.05
    assert wrong["accept_length_checked"] < 1.05
