"""The launch ledger: durable (fsync'd) appends, scrubbing, torn lines, cross-process safety."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import stat
from datetime import datetime
from pathlib import Path

import pytest

from tools.core import Context
from tools.errors import ToolFailure
from tools.guardrails.ledger import LEDGER_FILE, Ledger
from tools.guardrails.scrubbing import Scrubber

CANARY = "canary-ledger-secret-0123"


def test_first_append_creates_private_folder_and_file(tmp_path):
    state = tmp_path / "state" / ".model-factory"
    ledger = Ledger(state)
    assert ledger.read() == [] and not state.exists()  # reading creates nothing
    rec = ledger.append("plan", plan_id="p1", gpu_count=8)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / LEDGER_FILE).stat().st_mode) == 0o600
    assert rec["event"] == "plan" and rec["plan_id"] == "p1" and rec["gpu_count"] == 8
    assert datetime.fromisoformat(rec["ts"]).utcoffset().total_seconds() == 0
    assert list(rec)[:2] == ["ts", "event"]
    assert ledger.read() == [rec]


def test_records_are_one_json_line_each_and_read_in_order(tmp_path):
    ledger = Ledger(tmp_path)
    for i in range(5):
        ledger.append("attempt", plan_id="p", n=i, note="multi\nline")
    lines = (tmp_path / LEDGER_FILE).read_text().splitlines()
    assert len(lines) == 5 and all(json.loads(line)["event"] == "attempt" for line in lines)
    assert [r["n"] for r in ledger.read()] == [0, 1, 2, 3, 4]


def test_append_is_fsynced_after_the_write(tmp_path, monkeypatch):
    ledger = Ledger(tmp_path / "s")
    calls: list[tuple[str, int]] = []
    real_write, real_fsync = os.write, os.fsync

    def write(fd, data):
        calls.append(("write", fd))
        return real_write(fd, data)

    def fsync(fd):
        calls.append(("fsync", fd))
        return real_fsync(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    ledger.append("plan", plan_id="p")
    first_write = calls.index(next(c for c in calls if c[0] == "write"))
    assert ("fsync", calls[first_write][1]) in calls[first_write:]  # the file itself is fsynced
    assert sum(1 for c in calls if c[0] == "fsync") >= 2  # ... and the new folder entry
    calls.clear()
    ledger.append("plan", plan_id="q")
    assert [c[0] for c in calls] == ["write", "fsync"]


def test_records_are_scrubbed_before_they_reach_the_disk(tmp_path):
    ledger = Ledger(tmp_path, Scrubber([("HF_TOKEN", CANARY)]))
    rec = ledger.append("outcome", plan_id="p", detail=f"server said {CANARY}", facts={CANARY: [CANARY]})
    raw = (tmp_path / LEDGER_FILE).read_bytes()
    assert CANARY.encode() not in raw
    assert rec["detail"] == "server said [REDACTED:HF_TOKEN]"
    assert ledger.read()[0]["facts"] == {"[REDACTED:HF_TOKEN]": ["[REDACTED:HF_TOKEN]"]}


def test_for_context_uses_state_folder_and_context_scrubber(tmp_path):
    ctx = Context(env={"PRIME_API_KEY": CANARY, "MODEL_FACTORY_STATE_DIR": str(tmp_path / "st")}, home=tmp_path)
    ledger = ctx.store()
    ledger.append("plan", plan_id="p", note=CANARY)
    assert ledger.path == tmp_path / "st" / LEDGER_FILE
    assert CANARY not in ledger.path.read_text() and "[REDACTED:PRIME_API_KEY]" in ledger.path.read_text()


def test_reserved_fields_are_refused(tmp_path):
    with pytest.raises(ValueError):
        Ledger(tmp_path).append("plan", ts="forged")


def test_torn_last_line_is_skipped_and_the_next_append_starts_fresh(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.append("plan", plan_id="p1")
    ledger.append("approval", plan_id="p1")
    with open(ledger.path, "ab") as f:  # a crash in the middle of the third write
        f.write(b'{"ts":"2025-01-01T00:00:00.000+00:00","event":"attempt","plan_id":"p1","atte')
    assert [r["event"] for r in ledger.read()] == ["plan", "approval"]
    ledger.append("attempt", plan_id="p1", attempt_id="a2")
    records = ledger.read()
    assert [r["event"] for r in records] == ["plan", "approval", "attempt"]
    assert records[-1]["attempt_id"] == "a2"
    assert len(ledger.path.read_bytes().splitlines()) == 4  # torn line kept, on its own


def test_garbage_and_non_record_lines_are_ignored(tmp_path):
    ledger = Ledger(tmp_path)
    tmp_path.joinpath(LEDGER_FILE).write_bytes(b'[1,2]\n{"no_event":1}\n\n\xff\xfe\n{"event":"plan","plan_id":"x"}\n')
    assert ledger.read() == [{"event": "plan", "plan_id": "x"}]


# ------------------------------------------------------------------ several processes


def _append_many(state: str, worker: int, count: int, start) -> None:
    ledger = Ledger(state)
    start.wait()
    for i in range(count):
        ledger.append("attempt", plan_id=f"w{worker}", seq=i, pad="x" * (i * 37 % 900))


def test_concurrent_appends_from_several_processes_all_land_intact(tmp_path):
    ctx = mp.get_context("spawn")
    workers, count = 6, 40
    start = ctx.Barrier(workers)
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), w, count, start)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lines = (tmp_path / LEDGER_FILE).read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == workers * count + 1
    records = [json.loads(line) for line in lines[:-1]]  # every line is a whole record
    for w in range(workers):
        seqs = [r["seq"] for r in records if r["plan_id"] == f"w{w}"]
        assert seqs == list(range(count))  # per writer: all present, in order


def _hold_lock(state: str, locked, release) -> None:
    with Ledger(state).locked():
        locked.set()
        release.wait(60)


def test_lock_is_exclusive_across_processes(tmp_path):
    ctx = mp.get_context("spawn")
    locked, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(str(tmp_path), locked, release))
    holder.start()
    try:
        assert locked.wait(60)
        with pytest.raises(ToolFailure) as exc:
            Ledger(tmp_path, lock_timeout=0.2).append("plan", plan_id="p")
        assert exc.value.error.code == "ledger_busy" and exc.value.error.retryable
    finally:
        release.set()
        holder.join(60)
    Ledger(tmp_path, lock_timeout=5).append("plan", plan_id="p")
    assert len(Ledger(tmp_path).read()) == 1


def test_lock_is_reentrant_within_a_thread(tmp_path):
    ledger = Ledger(tmp_path, lock_timeout=1)
    with ledger.locked(), ledger.locked():
        ledger.append("plan", plan_id="p")
    assert Path(ledger.path).exists()
