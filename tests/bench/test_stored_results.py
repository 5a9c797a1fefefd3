"""Results stored gzipped read as the plain files did: bench/live/stored_results.py, and
bench/live/store_call.sh, which copies a call's $OUT into the repository and gzips its large
text files."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.bench.test_live_sweep import LIVE, level, script, write_sweep

STORE = LIVE / "store_call.sh"
TEXT = '{"label": "base", "concurrency": 1}\r\n{"label": "hook", "concurrency": 1}\n\nlast'
LINES = ['{"label": "base", "concurrency": 1}', '{"label": "hook", "concurrency": 1}', "", "last"]


def test_a_plain_and_a_gzipped_file_read_the_same(tmp_path: Path) -> None:
    stored = script("stored_results")
    (tmp_path / "plain").mkdir()
    (tmp_path / "gz").mkdir()
    plain, zipped = tmp_path / "plain" / "greedy.jsonl", tmp_path / "gz" / "greedy.jsonl"
    plain.write_bytes(TEXT.encode())
    (tmp_path / "gz" / "greedy.jsonl.gz").write_bytes(gzip.compress(TEXT.encode(), mtime=0))
    assert stored.read_lines(plain) == stored.read_lines(zipped) == LINES
    assert plain.read_text().splitlines() == LINES  # what the readers did before
    assert stored.read_text(zipped) == plain.read_text()
    assert stored.stored_path(zipped) == tmp_path / "gz" / "greedy.jsonl.gz"
    assert stored.is_stored(plain) and stored.is_stored(zipped)
    # a name ending in .gz (profiler traces) is decompressed, not read as bytes
    assert stored.read_lines(tmp_path / "gz" / "greedy.jsonl.gz") == LINES


def test_a_missing_file_names_both_paths_tried(tmp_path: Path) -> None:
    stored = script("stored_results")
    missing = tmp_path / "call9" / "sweep.jsonl"
    assert not stored.is_stored(missing) and stored.stored_path(missing) is None
    with pytest.raises(FileNotFoundError) as raised:
        stored.read_lines(missing)
    assert str(raised.value) == (
        f"neither {missing} nor {missing}.gz exists (a stored result is one or the other)"
    )


def sweep_call(out: Path) -> None:
    """A device call's $OUT as sweep.sh leaves it: two servers taking 40 turns at one level,
    their greedy outputs, the log; every text file but models.json over 8 KiB."""
    write_sweep(
        out,
        [
            {**level(label, 4, [rate + rep, rate - rep], accept), "rep": rep}
            for rep in range(40)
            for label, rate, accept in (("base", 800.0, None), ("eagle3-high", 1300.0, 3.4))
        ],
    )
    greedy = [
        {"label": label, "prompt": p, "output_ids": list(range(p, p + 40))}
        for p in range(24)
        for label in ("base", "eagle3-high")
    ]
    (out / "greedy.jsonl").write_text("".join(json.dumps(g) + "\n" for g in greedy))
    (out / "run.log").write_text("".join(f"[{t}s] turn {t}\n" for t in range(900)))
    (out / "models.json").write_text('{"vocab": 4096}\n')  # small: stays plain
    (out / "report.md").write_text("| c | base |\n" * 700)  # a report: stays plain
    (out / "servers.tgz").write_bytes(bytes(range(256)) * 40)


def store(src: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(STORE), str(src), str(dest)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.skipif(shutil.which("gzip") is None, reason="needs gzip")
def test_a_stored_call_reads_as_its_out_did(tmp_path: Path) -> None:
    out, call = tmp_path / "out", tmp_path / "results" / "call31"
    sweep_call(out)
    large = ("sweep.jsonl", "greedy.jsonl", "run.log", "report.md")
    assert min((out / name).stat().st_size for name in large) >= 8192
    done = store(out, call)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("gzipped: greedy.jsonl run.log sweep.jsonl\n")
    assert sorted(p.name for p in call.iterdir()) == [
        "greedy.jsonl.gz",
        "models.json",
        "report.md",
        "run.log.gz",
        "servers.tgz",
        "sweep.jsonl.gz",
    ]
    for name in ("greedy.jsonl", "run.log", "sweep.jsonl"):
        packed = (call / f"{name}.gz").read_bytes()
        assert gzip.decompress(packed) == (out / name).read_bytes()
        assert packed[3:8] == bytes(5)  # gzip -n: no file name, no time
    for name in ("models.json", "report.md", "servers.tgz"):
        assert (call / name).read_bytes() == (out / name).read_bytes()
    # the report reads the stored call as it read the device's $OUT (the call named "call31")
    report = script("sweep_report")
    (tmp_path / "call31").symlink_to(out)
    assert report.load([call]) == report.load([tmp_path / "call31"])
    again = tmp_path / "again" / "call31"
    assert store(out, again).returncode == 0
    assert [p.read_bytes() for p in sorted(again.iterdir())] == [
        p.read_bytes() for p in sorted(call.iterdir())
    ]


def test_storing_into_an_existing_folder_or_from_a_missing_one_is_refused(tmp_path: Path) -> None:
    out, call = tmp_path / "out", tmp_path / "call31"
    sweep_call(out)
    call.mkdir()
    (call / "report.md").write_text("kept\n")
    done = store(out, call)
    assert (done.returncode, done.stderr) == (
        2,
        f"store_call.sh: {call} exists; store a call into a new folder\n",
    )
    assert [p.name for p in call.iterdir()] == ["report.md"]
    missing = store(tmp_path / "nothing", tmp_path / "call32")
    assert (missing.returncode, missing.stderr) == (
        2,
        f"store_call.sh: no folder {tmp_path / 'nothing'} (the call's $OUT)\n",
    )
    assert not (tmp_path / "call32").exists()
