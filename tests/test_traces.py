"""Trace tools against the emulator's traces host over real HTTP: cursor pages (all, per
step, episodes, eval runs), the output budget, and whole-run downloads with manifest,
sha256, resume, a connection cut mid-download, a CLI download interrupted by SIGINT or
killed (SIGTERM, SIGKILL) then resumed, dest refusals and the missing-upload report.

Runs are created from the bundled prime-rl example ``basic/reverse-text/rl.toml``: 20
steps of 4 episodes x 4 traces (320 traces, 80 episodes) plus eval traces every 5 steps
in the eval run ``<run id>-eval``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _helpers import call, mf, mf_json, ok

from tools.core import OUTPUT_BUDGET_CHARS, Context
from tools.errors import ToolError
from tools.errors import call as tool_call
from tools.platform import files as atomic_files

DONE = 60 + 90 + 30 * 20 + 10 + 5  # queued + start-up + 20 steps + finalize + ingest, simulated seconds


def stored(emulator, run_id: str) -> dict:
    """The emulator's trace records of a run (what the host holds), by id."""
    return {t.trace_id: t for t in emulator.state.store.traces.values() if t.run_id == run_id}


def walk(ctx: Context, **arguments) -> list:
    """Every row of a listing, following next_cursor."""
    rows, cursor = [], None
    for _ in range(200):
        page = ok(call(ctx, "mf_list_traces", cursor=cursor, **arguments))
        assert len(page.model_dump_json()) <= OUTPUT_BUDGET_CHARS
        rows += getattr(page, arguments.get("kind", "traces"))
        cursor = page.next_cursor
        if cursor is None:
            return rows
    raise AssertionError("pagination did not end")


def files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def temporary(folder: Path) -> list[Path]:
    """Files write_atomic had not renamed yet (hidden ``.<name>.*.partial``)."""
    return [f for f in files(folder) if f.name.startswith(".") or f.name.endswith(".partial")]


def read_manifest(dest: Path) -> dict:
    """``dest/manifest.jsonl`` folded as a reader would: the header's fields, the last ``expected``,
    ``missing`` and ``state``, and one entry per file (a later line for a file replaces an earlier
    one; a line torn by a kill is skipped), plus every other line by kind."""
    folded: dict = {"traces": {}, "episodes": {}, "lines": []}
    for raw in (dest / "manifest.jsonl").read_bytes().splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        folded["lines"].append(line)
        kind, fields = line["kind"], {k: v for k, v in line.items() if k != "kind"}
        if kind in ("trace", "episode"):
            folded[kind + "s"][line[kind + "_id"]] = fields
        elif kind == "header":
            folded.update(fields)
        elif kind == "state":
            folded["state"] = line["state"]
        elif kind in ("expected", "missing"):
            folded[kind] = fields
    folded["traces"], folded["episodes"] = list(folded["traces"].values()), list(folded["episodes"].values())
    return folded


def recorded(dest: Path) -> dict[str, dict]:
    """The manifest's trace entries by id, each checked against its file (sha256, bytes)."""
    manifest = read_manifest(dest)
    for entry in manifest["traces"]:
        data = (dest / entry["file"]).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (entry["sha256"], entry["bytes"])
    return {e["trace_id"]: e for e in manifest["traces"]}


def start_cli_download(mf_env: dict, run_id: str, dest: Path) -> subprocess.Popen:
    """``python -m skill download-traces RUN DEST --json`` as a user runs it."""
    return subprocess.Popen([sys.executable, "-m", "skill", "download-traces", run_id, str(dest), "--json"],
                            env=mf_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until(proc: subprocess.Popen, ready, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"download ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "download made no progress"
        time.sleep(0.02)


# -- mf_list_traces -------------------------------------------------------------------------------


def test_pages_walk_every_trace_and_match_the_run_summary(frozen_ctx, emulator, launch):
    run_id = launch(after=DONE)
    summary = frozen_ctx.traces().get_run(run_id)
    rows = walk(frozen_ctx, run_id=run_id, limit=100)
    assert len(rows) == summary.trace_count == len(stored(emulator, run_id)) == 320
    assert len({r.trace_id for r in rows}) == 320
    assert {r.run_type for r in rows} == {"train"} and {r.run_step for r in rows} == set(range(1, 21))
    small = [r.trace_id for r in walk(frozen_ctx, run_id=run_id, limit=7)]
    assert small == [r.trace_id for r in rows]  # a budget-shortened page skips nothing


def test_budget_shortens_a_page_without_losing_rows(frozen_ctx, launch):
    run_id = launch(after=DONE)
    page = ok(call(frozen_ctx, "mf_list_traces", run_id=run_id, limit=100))
    assert len(page.model_dump_json()) <= OUTPUT_BUDGET_CHARS
    assert page.truncated and 10 < page.count < 100 and page.omitted == 0
    assert page.next_cursor and "next_cursor" in page.narrow_hint
    following = ok(call(frozen_ctx, "mf_list_traces", run_id=run_id, limit=5, cursor=page.next_cursor))
    assert not following.truncated and following.count == 5
    reference = [r.trace_id for r in walk(frozen_ctx, run_id=run_id, limit=10)][:page.count + 5]
    assert [r.trace_id for r in page.traces + following.traces] == reference


def test_filters(frozen_ctx, emulator, launch):
    run_id = launch(after=DONE)
    errors = walk(frozen_ctx, run_id=run_id, limit=50, has_error=True)
    expected = {t.trace_id for t in stored(emulator, run_id).values() if t.has_error}
    assert {r.trace_id for r in errors} == expected and all(r.reward is None for r in errors)
    high = walk(frozen_ctx, run_id=run_id, limit=50, reward_min=0.9)
    assert high and all(r.reward >= 0.9 for r in high)


def test_traces_of_one_step_across_pages(frozen_ctx, emulator, launch):
    run_id = launch(after=DONE)
    rows = walk(frozen_ctx, run_id=run_id, step=7, limit=5)
    expected = {t.trace_id for t in stored(emulator, run_id).values() if t.run_step == 7}
    assert len(rows) == len(expected) == 16
    assert {r.trace_id for r in rows} == expected and {r.run_step for r in rows} == {7}
    first = ok(call(frozen_ctx, "mf_list_traces", run_id=run_id, step=7, limit=5))
    assert first.next_cursor.startswith("mfl1.")
    wrong = call(frozen_ctx, "mf_list_traces", run_id=run_id, limit=5, cursor=first.next_cursor)
    assert isinstance(wrong, ToolError) and wrong.code == "bad_arguments"
    other_step = call(frozen_ctx, "mf_list_traces", run_id=run_id, step=8, limit=5, cursor=first.next_cursor)
    assert isinstance(other_step, ToolError) and other_step.code == "bad_arguments"


def test_episodes_and_eval_runs(frozen_ctx, emulator, launch):
    run_id = launch(after=DONE)
    episodes = walk(frozen_ctx, run_id=run_id, kind="episodes", step=3, limit=3)
    expected = {e.episode_id for e in emulator.state.store.episodes.values() if e.run_id == run_id and e.run_step == 3}
    assert {e.episode_id for e in episodes} == expected and len(expected) == 4
    errored = [e for e in walk(frozen_ctx, run_id=run_id, kind="episodes", has_error=True, limit=100) if e.error]
    assert all(e.has_error and e.error.startswith("RolloutError") for e in errored)
    evals = ok(call(frozen_ctx, "mf_list_traces", run_id=run_id, kind="eval_runs"))
    eval_traces = stored(emulator, f"{run_id}-eval")
    assert [(r.run_id, r.trace_count, r.step_min, r.step_max) for r in evals.eval_runs] == [
        (f"{run_id}-eval", len(eval_traces), 5, 20)]
    eval_rows = walk(frozen_ctx, run_id=f"{run_id}-eval", limit=100)
    assert len(eval_rows) == len(eval_traces) and {r.run_type for r in eval_rows} == {"eval"}
    refused = call(frozen_ctx, "mf_list_traces", run_id=run_id, kind="episodes", reward_min=0.5)
    assert isinstance(refused, ToolError) and refused.code == "bad_arguments"


def test_unknown_run(frozen_ctx):
    result = call(frozen_ctx, "mf_list_traces", run_id="cunknown00000000000000000")
    assert isinstance(result, ToolError) and result.code == "not_found"


# -- mf_download_traces ---------------------------------------------------------------------------


def test_download_writes_every_trace_with_a_true_manifest(frozen_ctx, emulator, launch, tmp_path):
    run_id = launch(after=DONE)
    reports = []
    frozen_ctx.progress = lambda done, total, message: reports.append((done, total))
    dest = tmp_path / "dl"
    result = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest)))
    held = stored(emulator, run_id)
    assert (result.traces_downloaded, result.traces_on_disk, result.expected_trace_count) == (320, 320, 320)
    assert (result.episodes_downloaded, result.expected_episode_count) == (80, 80)
    assert result.complete and result.missing.summary.startswith("complete") and result.skipped_existing == 0
    manifest = read_manifest(dest)
    assert manifest["run_id"] == run_id and manifest["expected"]["trace_count"] == 320
    assert len(manifest["expected"]["steps"]) == 20
    assert {e["trace_id"] for e in manifest["traces"]} == set(held)
    total = 0
    for entry in manifest["traces"]:
        data = (dest / entry["file"]).read_bytes()
        assert data == held[entry["trace_id"]].raw
        assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["bytes"]
        assert (entry["episode_id"], entry["run_step"]) == (held[entry["trace_id"]].episode_id,
                                                            held[entry["trace_id"]].run_step)
        total += len(data)
    for entry in manifest["episodes"]:
        envelope = json.loads((dest / entry["file"]).read_bytes())
        assert hashlib.sha256((dest / entry["file"]).read_bytes()).hexdigest() == entry["sha256"]
        assert len(envelope["traces"]) == 4
    assert result.written_bytes == total + sum(e["bytes"] for e in manifest["episodes"])
    assert len(files(dest)) == 320 + 80 + 1
    assert reports[-1] == (320, 320) and len(reports) == 320


def test_resume_skips_everything_then_refetches_a_corrupted_file(frozen_ctx, launch, tmp_path):
    run_id = launch(after=DONE)
    dest = tmp_path / "dl"
    ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest)))
    again = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest)))
    assert (again.traces_downloaded, again.episodes_downloaded, again.written_bytes) == (0, 0, 0)
    assert again.skipped_existing == 400 and again.complete
    manifest = read_manifest(dest)
    corrupted, deleted = (dest / manifest["traces"][0]["file"]), (dest / manifest["traces"][1]["file"])
    good = corrupted.read_bytes()
    corrupted.write_bytes(good[:-10] + b"corrupted!")
    deleted.unlink()
    third = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest)))
    assert (third.traces_downloaded, third.refetched_corrupted, third.skipped_existing) == (2, 1, 398)
    assert corrupted.read_bytes() == good and deleted.is_file() and third.complete
    fresh = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest), resume=False))
    assert (fresh.traces_downloaded, fresh.skipped_existing) == (320, 0)


def test_connection_cut_leaves_no_partial_file_and_a_rerun_completes(frozen_ctx, emulator, launch, tmp_path):
    run_id = launch(after=DONE)
    dest = tmp_path / "dl"
    victim = [t.trace_id for t in frozen_ctx.traces().list_traces(run_id=run_id, limit=100).items][50]
    emulator.faults.cut(100, "GET", f"/traces/{victim}", times=2)  # both attempts of one file, mid-download
    failed = call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest))
    assert isinstance(failed, ToolError) and failed.code == "unavailable" and failed.retryable
    assert failed.next_calls == [tool_call("mf_download_traces", run_id=run_id, dest=str(dest))]
    assert "resumes" in failed.fix
    assert temporary(dest) == []
    kept = recorded(dest)  # every file that landed is recorded, and each matches its sha256
    assert sorted(f"{t}.json" for t in kept) == sorted(f.name for f in (dest / "traces").iterdir())
    assert victim not in kept and 0 < len(kept) < 320
    assert read_manifest(dest)["state"] == "interrupted"
    done = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest)))
    assert done.complete and done.traces_on_disk == 320
    assert (done.skipped_existing, done.traces_downloaded) == (len(kept), 320 - len(kept))


def _failing(first: bytes):
    yield first
    raise OSError("connection reset mid-file")


@pytest.mark.parametrize("unnamed", [True, False], ids=["unnamed-file", "hidden-sibling"])
def test_a_written_file_appears_whole_or_not_at_all(tmp_path, monkeypatch, unnamed):
    if not unnamed:  # a file system that makes no unnamed files (not Linux, or without O_TMPFILE)
        monkeypatch.setattr(atomic_files, "_unnamed_file", lambda folder: None)
    target = tmp_path / "tr-1.json"
    assert atomic_files.write_atomic(target, [b'{"a":', b" 1}"]) == (8, hashlib.sha256(b'{"a": 1}').hexdigest())
    assert target.read_bytes() == b'{"a": 1}' and target.stat().st_mode & 0o777 == 0o600
    with pytest.raises(OSError, match="mid-file"):
        atomic_files.write_atomic(tmp_path / "tr-2.json", _failing(b'{"half'))
    with pytest.raises(OSError, match="mid-file"):
        atomic_files.write_atomic(target, _failing(b'{"other'))
    assert [p.name for p in tmp_path.iterdir()] == ["tr-1.json"] and target.read_bytes() == b'{"a": 1}'
    assert atomic_files.write_atomic(target, [b"[]"])[0] == 2 and target.read_bytes() == b"[]"  # replaced in one step
    assert [p.name for p in tmp_path.iterdir()] == ["tr-1.json"]


def test_a_process_killed_mid_write_leaves_nothing_behind(tmp_path):
    code = ("import sys, time; from pathlib import Path; from tools.platform.files import write_atomic\n"
            "def chunks():\n    yield b'{\"half'\n    print('writing', flush=True)\n    time.sleep(60)\n"
            "    yield b'\"}'\n"
            "write_atomic(Path(sys.argv[1]) / 'tr-1.json', chunks())\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parent.parent)
    try:
        assert proc.stdout.readline().strip() == "writing"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
        proc.communicate()
    assert list(tmp_path.iterdir()) == []  # no partial file, and no temporary one for the next call to clean


def test_ctrl_c_saves_the_manifest_and_a_rerun_resumes(frozen_ctx, emulator, launch, tmp_path, mf_env):
    run_id = launch(after=DONE)
    dest = tmp_path / "dl1"
    emulator.faults.delay(0.03, "GET", "/traces/tr-*", times=None)  # ~10 s in all: interrupted mid-way
    proc = start_cli_download(mf_env, run_id, dest)
    try:
        wait_until(proc, lambda: len(list((dest / "traces").glob("*.json"))) >= 20)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130
    finally:
        proc.kill()
        proc.communicate()
    assert temporary(dest) == []
    manifest = read_manifest(dest)
    assert manifest["state"] == "interrupted" and manifest["run_id"] == run_id
    kept, on_disk = recorded(dest), {f.stem for f in (dest / "traces").glob("*.json")}
    assert set(kept) <= on_disk and 20 <= len(on_disk) < 320
    assert len(on_disk - set(kept)) <= 1  # only a file renamed just before Ctrl-C may miss its record
    emulator.faults.clear()
    done = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest)))
    assert done.complete and done.traces_on_disk == 320 and done.skipped_existing == len(kept)
    assert done.traces_downloaded == 320 - len(kept)
    assert sorted(f.stem for f in (dest / "traces").iterdir()) == sorted(stored(emulator, run_id))
    assert set(recorded(dest)) == set(stored(emulator, run_id)) and temporary(dest) == []
    assert read_manifest(dest)["state"] == "finished"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_download_resumes_and_refetches_what_the_manifest_missed(frozen_ctx, emulator, launch, tmp_path,
                                                                          mf_env, sig):
    run_id = launch(after=DONE)
    dest = tmp_path / "dl1"
    emulator.faults.delay(0.03, "GET", "/traces/tr-*", times=None)
    proc = start_cli_download(mf_env, run_id, dest)
    try:  # wait for a periodic manifest write that records some traces (about 1 s in) and for more files
        wait_until(proc, lambda: (dest / "manifest.jsonl").is_file()
                   and 5 <= len(recorded(dest)) < len(list((dest / "traces").glob("*.json"))) - 2)
        proc.send_signal(sig)
        # SIGTERM is handled like Ctrl-C by the CLI (exit 143, manifest saved); SIGKILL cannot be
        assert proc.wait(timeout=10) == (143 if sig == signal.SIGTERM else -sig)
    finally:
        proc.kill()
        proc.communicate()
    manifest = read_manifest(dest)
    assert manifest["state"] == ("interrupted" if sig == signal.SIGTERM else "in_progress")
    kept, held = recorded(dest), stored(emulator, run_id)
    victim = dest / "traces" / f"{min(set(held) - set(kept))}.json"
    victim.write_bytes(b'{"tampered": true}')  # on disk, not in the manifest (like files landed since): not trusted
    (dest / "traces" / ".tr-left.json.x1y2.partial").write_bytes(b'{"half')  # what a kill mid-write leaves
    (dest / ".manifest.jsonl.x1y2.partial").write_bytes(b'{"half')
    emulator.faults.clear()
    done = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest)))
    assert done.complete and done.traces_on_disk == 320
    assert (done.skipped_existing, done.traces_downloaded) == (len(kept), 320 - len(kept)) and done.skipped_existing > 0
    assert sorted(f.name for f in (dest / "traces").iterdir()) == sorted(f"{t}.json" for t in held)
    assert victim.read_bytes() == held[victim.stem].raw
    assert set(recorded(dest)) == set(held) and temporary(dest) == []


def test_a_single_cut_is_retried_within_the_call(frozen_ctx, emulator, launch, tmp_path):
    run_id = launch(after=DONE)
    rule = emulator.faults.cut(100, "GET", "/traces/tr-*", skip=10, times=1)
    result = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(tmp_path / "dl")))
    assert rule.hits == 1 and result.complete and result.traces_downloaded == 320


def test_missing_uploads_are_reported(frozen_ctx, emulator, launch, tmp_path):
    run_id = launch("missing_traces", steps=[2, 5], after=DONE)
    victim = next(e for e in emulator.state.store.episodes.values() if e.run_id == run_id and e.run_step == 9)
    lost = victim.trace_ids[:2]
    for trace_id in lost:  # uploads of two member traces never landed; the episode envelope names them
        del emulator.state.store.traces[trace_id]
    result = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(tmp_path / "dl")))
    missing = result.missing
    assert not result.complete and result.traces_on_disk == result.expected_trace_count == 320 - 32 - 2
    assert missing.steps_without_traces == [2, 5]
    gaps = missing.episodes_with_missing_traces
    assert [(g.episode_id, g.missing_count, sorted(g.missing_trace_ids)) for g in gaps] == \
        [(victim.episode_id, 2, sorted(lost))]
    assert "2 completed step(s) with no traces" in missing.summary and "missing 2 member trace(s)" in missing.summary
    manifest = read_manifest(tmp_path / "dl")
    assert manifest["missing"]["steps_without_traces"] == [2, 5]


def test_dest_must_be_ours(frozen_ctx, launch, tmp_path):
    run_id = launch(after=DONE)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "thesis.txt").write_text("do not touch")
    refused = call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(busy))
    assert isinstance(refused, ToolError) and refused.code == "bad_arguments"
    assert [p.name for p in busy.iterdir()] == ["thesis.txt"]
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(a_file)).code == "bad_arguments"
    someone_elses = tmp_path / "editor"
    someone_elses.mkdir()
    (someone_elses / ".thesis.docx.k3.partial").write_text("an editor's temporary file")
    assert call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(someone_elses)).code == "bad_arguments"
    assert [p.name for p in someone_elses.iterdir()] == [".thesis.docx.k3.partial"]
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / ".manifest.jsonl.k1.partial").write_bytes(b'{"form')  # a call killed while writing its first manifest
    ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(ours), max_traces=3))
    assert sorted(p.name for p in ours.iterdir()) == ["episodes", "manifest.jsonl", "traces"]
    other = launch(after=DONE)
    clash = call(frozen_ctx, "mf_download_traces", run_id=other, dest=str(ours))
    assert isinstance(clash, ToolError) and run_id in clash.message


def test_a_dest_under_a_file_is_refused_naming_the_file_and_a_dest_that_works(mf_env, launch, tmp_path):
    run_id = launch(after=DONE)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("do not touch")
    refused = mf("download-traces", run_id, a_file / "sub", env=mf_env, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "bad_arguments" in refused.stderr and str(a_file) in refused.stderr
    assert f"{tmp_path / f'traces-{run_id}'}" in refused.stderr
    assert a_file.read_text() == "do not touch"
    code, report = mf_json("download-traces", run_id, a_file / "sub", env=mf_env, cwd=tmp_path)
    instead = report["next_calls"][0]["arguments"]
    assert code == 2 and instead == {"run_id": run_id, "dest": str(tmp_path / f"traces-{run_id}")}
    assert mf("download-traces", run_id, instead["dest"], "--max-traces", "3", env=mf_env, cwd=tmp_path).returncode == 0


def test_max_traces_and_unsafe_ids(frozen_ctx, emulator, launch, tmp_path):
    run_id = launch(after=DONE)
    template = next(iter(stored(emulator, run_id).values()))
    for bad in ("../escape", "a\\b", ".hidden"):
        record = dataclasses.replace(template, trace_id=bad, created_at=template.created_at + 1000)
        emulator.state.store.traces[bad] = record
    dest = tmp_path / "dl"
    result = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest), max_traces=10))
    assert sorted(result.unsafe_ids) == sorted(["../escape", "a\\b", ".hidden"])
    assert result.stopped_at_max and not result.complete and result.traces_downloaded == 7
    assert len(list((dest / "traces").iterdir())) == 7
    assert not (tmp_path / "escape.json").exists() and all(p.is_relative_to(dest) for p in tmp_path.rglob("*.json")
                                                            if "dl" in p.parts)
    assert result.missing.summary.startswith("partial")


def plant_unsafe_ids(emulator, run_id: str) -> list[str]:
    """Three traces of the run whose ids cannot be file names (a path escape, a backslash, a dot file)."""
    template = next(iter(stored(emulator, run_id).values()))
    bad = ["../escape", "a\\b", ".hidden"]
    for trace_id in bad:
        emulator.state.store.traces[trace_id] = dataclasses.replace(template, trace_id=trace_id,
                                                                    created_at=template.created_at + 1000)
    return bad


def test_ids_unsafe_as_file_names_are_skipped_for_safety_and_not_blamed_on_the_platform(frozen_ctx, emulator, launch,
                                                                                           tmp_path):
    run_id = launch(after=DONE)
    bad = plant_unsafe_ids(emulator, run_id)
    dest = tmp_path / "dl"
    result = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest)))
    assert result.skipped_for_safety == 3 and sorted(result.unsafe_ids) == sorted(bad)
    assert not result.complete and result.listing_complete and result.traces_on_disk == 320
    missing = result.missing
    assert missing.summary.startswith("skipped:") and "nothing is missing on the platform" in missing.summary
    assert (missing.steps_short, missing.trace_count_gap, missing.gone_trace_ids) == ([], 0, [])
    assert "skipped for safety" in result.note
    skipped = [line for line in read_manifest(dest)["lines"] if line["kind"] == "skipped"]
    assert sorted(line["id"] for line in skipped) == sorted(bad)
    assert {line["reason"] for line in skipped} == {"unsafe_id"}
    assert not list(tmp_path.rglob("*escape*")) and not list(tmp_path.rglob(".hidden*"))


def test_a_run_with_missing_uploads_and_unsafe_ids_reports_both_apart(frozen_ctx, emulator, launch, tmp_path):
    run_id = launch("missing_traces", steps=[4], after=DONE)
    plant_unsafe_ids(emulator, run_id)
    result = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(tmp_path / "dl")))
    summary = result.missing.summary
    assert not result.complete and result.missing.steps_without_traces == [4]
    assert summary.startswith("missing: 1 completed step(s) with no traces")
    assert summary.endswith("apart from that, 3 id(s) skipped for safety (not usable as file names)")
