"""A server that died mid-sweep: its turns completed nothing and measured nothing.

Call 61 of the recorded sweeps had five servers on an 80 GB card; the A/A replica started, then
ran out of memory at its first turn, and every later turn of it was 256 refused connections. The
report then crashed on its 0 tok/s level; it must leave such turns out and say so.
"""

from __future__ import annotations

import sys

from tests.bench.test_live_sweep import level, script, write_sweep


def dead(label, conc, rep):
    return {
        "label": label,
        "concurrency": conc,
        "tok_per_s": 0.0,
        "window_tok_per_s": [0.0],
        "requests": 0,
        "errors": 256,
        "error_sample": ["ClientConnectorError(... ConnectionRefusedError(111, 'Connect call')"],
        "rep": rep,
        "tag": "turns",
    }


def turn(label, conc, rate, rep, accept=None):
    return {**level(label, conc, [rate], accept), "rep": rep, "tag": "turns"}


def test_a_dead_servers_turns_are_left_out_and_listed(tmp_path, capsys, monkeypatch):
    report = script("sweep_report")
    lines = []
    for rep in range(1, 6):
        lines += [
            turn("base", 128, 1000.0 + rep, rep),
            turn("eagle3-a25", 128, 700.0, rep, accept=2.5),
            turn("hook-a25", 128, 990.0 - rep, rep, accept=30.0),
            dead("eagle3-a25+aa", 128, rep),
        ]
    # a server that failed one turn only: that turn left out, the others kept
    lines.append(dead("hook-a25", 128, 6))
    write_sweep(tmp_path / "callx", lines)
    rows, _ = report.load([tmp_path / "callx"])
    by = {r["label"]: r for r in rows}
    assert set(by) == {"base", "eagle3-a25", "hook-a25"}
    assert by["hook-a25"]["requests"] == 50 and by["hook-a25"]["errors"] == 0
    assert by["hook-a25"]["tok_per_s"] == 987.0  # (989 + ... + 985) / 5, no 0 among them
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path / "callx")])
    report.main()
    text = capsys.readouterr().out
    assert "| callx | eagle3-a25+aa | 128 | 5 | 1280 | ClientConnectorError(" in text
    assert "| callx | hook-a25 | 128 | 1 | 256 |" in text
    # no A/A pair left at 128: the claim cannot be shown there, whatever its own error
    assert "UNDECIDED (no A/A pair at this level: the floor is unknown)" in text


def test_a_sweep_with_no_failed_turn_has_no_such_table(tmp_path, capsys, monkeypatch):
    report = script("sweep_report")
    write_sweep(tmp_path / "callx", [turn("base", 8, 500.0, 1), turn("base+aa", 8, 501.0, 1)])
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path / "callx")])
    report.main()
    text = capsys.readouterr().out
    assert "| callx | base | 500 ±0% |" in text and "completed no request" not in text
