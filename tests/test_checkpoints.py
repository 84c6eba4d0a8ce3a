"""mf_download_checkpoint, mf_list_checkpoints (files on the volume) and mf_list_volumes (a volume's folder),
over real HTTP and real S3 requests (boto3, SigV4) against the emulator's volume storage, clock stopped.

The checkpoints are the emulator's (about 13 MiB: small DCP stand-ins and a 12 MiB sparse shard); where parts
matter the part size is lowered to 1 MiB, so the shard is 12 parts. Interruptions are a Ctrl-C raised from the
progress callback (in-process, deterministic) and a SIGKILL of a real process.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _helpers import call, err, example, ok, planned

from skill.emulator import TEAM_RESEARCH_ID, EmulatorServer, Timing
from tools.core import Context
from tools.monitor import checkpoints as ck
from tools.platform import wire

T = Timing()
#: From a run's creation until its last checkpoint (step 20) is READY and synced to the volume.
SYNCED = (T.queue_seconds + T.startup_seconds + 20 * T.step_seconds + T.finalize_seconds
          + T.checkpoint_upload_seconds + T.volume_sync_seconds + 1)
SHARD = "trainer/__2_0.distcp"


def volume_run(ctx: Context, emulator: EmulatorServer, rl_config: dict[str, Any], *, after: float = SYNCED,
               volume: str | None = "research-data") -> str:
    """A run of the reverse-text example on the research team's volume, the clock moved ``after`` seconds."""
    body = wire.build_create_body(rl_config, name="ckpt-run", team_id=TEAM_RESEARCH_ID, volume=volume)
    run_id = ctx.platform().create_run(body).run_id
    emulator.state.advance(after)
    return run_id


def served(emulator: EmulatorServer, run_id: str, step: int = 20) -> dict[str, bytes]:
    """The checkpoint's files as the emulator's storage holds them (relative path -> bytes)."""
    volume = emulator.state.volume_prefix("research-data", TEAM_RESEARCH_ID)
    prefix = volume + f"runs/{run_id}/checkpoints/step_{step}/"
    return {o.key[len(prefix):]: b"".join(o.chunks(honest=True)) for o in emulator.state.stored_objects(volume)
            if o.key.startswith(prefix)}


def on_disk(dest: Path) -> dict[str, bytes]:
    """Every file under ``dest`` but our own folder."""
    return {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*")
            if p.is_file() and ck.STATE_DIR not in p.relative_to(dest).parts}


def s3_gets(recorder: Any) -> list[Any]:
    return [r for r in recorder.requests if r.method == "GET" and r.path.startswith("/_s3/") and "list-type" not in
            r.query]


def routes(recorder: Any) -> int:
    return sum(r.method == "POST" and r.path.endswith("/transfer") for r in recorder.requests)


@pytest.fixture
def small_parts(monkeypatch):
    """1 MiB parts: the 12 MiB shard is 12 of them."""
    monkeypatch.setattr(ck, "PART_BYTES", 2**20)


class Interrupt:
    """A progress callback that raises KeyboardInterrupt (a person's Ctrl-C) at its ``at``-th report."""

    def __init__(self, at: int) -> None:
        self.at, self.calls = at, 0

    def __call__(self, done: float, total: float | None, message: str) -> None:
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt


# -- a whole download ---------------------------------------------------------------------------------


def test_download_puts_every_file_in_place_verified_with_its_mtime_and_a_manifest(
        frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    result = ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "ckpt")))
    dest = tmp_path / "ckpt"
    assert on_disk(dest) == served(emulator, run_id)
    assert (result.step, result.volume, result.path) == (20, "research-data", f"runs/{run_id}/checkpoints/step_20/")
    assert result.files == result.files_downloaded == result.md5_verified == 5 and result.bytes == result.fetched_bytes
    assert "DCP" in result.format and "dcp_to_hf" in result.format
    assert not list((dest / ck.STATE_DIR / "partial").iterdir())  # nothing half-written is left
    lines = [json.loads(line) for line in (dest / ck.MANIFEST).read_text().splitlines()]
    assert lines[0]["kind"] == "header" and lines[0]["run_id"] == run_id and lines[-1]["state"] == "finished"
    files = {x["file"]: x for x in lines if x["kind"] == "file"}
    assert {f: x["md5"] for f, x in files.items()} == {f: hashlib.md5(b).hexdigest() for f, b in on_disk(dest).items()}
    created = emulator.state.clock.epoch + emulator.state.run(run_id).checkpoints[-1].created_at
    assert abs((dest / SHARD).stat().st_mtime - created) < 0.01  # the object's rclone mtime, as prime restores it


def test_a_second_call_fetches_nothing_and_checks_every_file_again(frozen_ctx, emulator, rl_config, tmp_path, recorder):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")))
    before = len(s3_gets(recorder))
    again = ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")))
    assert (again.files_kept, again.files_downloaded, again.fetched_bytes, again.md5_verified) == (5, 0, 0, 5)
    assert len(s3_gets(recorder)) == before  # no object read again


def test_interrupted_mid_way_the_next_call_fetches_only_the_missing_parts(
        frozen_ctx, emulator, rl_config, tmp_path, recorder, small_parts):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    dest = tmp_path / "ckpt"
    frozen_ctx.progress = Interrupt(at=7)
    with pytest.raises(KeyboardInterrupt):
        call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(dest))
    journal = (dest / ck.MANIFEST).read_text().splitlines()
    landed = sum(json.loads(line)["kind"] == "part" for line in journal)
    assert json.loads(journal[-1])["state"] == "interrupted" and landed >= 7
    assert SHARD not in on_disk(dest)  # a file gets its name only when whole
    first = len(s3_gets(recorder))

    frozen_ctx.progress = None
    result = ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(dest)))
    total_parts = 4 + 12
    assert result.parts_resumed + result.parts_fetched + result.files_kept == total_parts
    assert result.parts_resumed > 0 and result.parts_fetched == len(s3_gets(recorder)) - first
    assert result.md5_verified == 5 and on_disk(dest) == served(emulator, run_id)


def test_a_killed_process_leaves_a_journal_the_next_call_resumes_from(emulator, mf_env, tmp_path, rl_config):
    ctx = Context(env=mf_env, home=tmp_path / "home", state_dir=tmp_path / "state")
    emulator.state.set_speed(0)
    run_id = volume_run(ctx, emulator, rl_config)
    emulator.faults.delay(60, "GET", f"/_s3/*{SHARD}")  # the shard is held: the process is caught mid-way
    dest = tmp_path / "ckpt"
    proc = subprocess.Popen([sys.executable, "-m", "skill", "download-checkpoint", run_id, str(dest), "--json"],
                            env=mf_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = dest / ck.MANIFEST
    try:
        deadline = time.monotonic() + 60
        while not (journal.exists() and journal.read_text().count('"kind":"file"') == 4):
            assert proc.poll() is None and time.monotonic() < deadline, "the small files never landed"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    emulator.faults.clear()
    assert json.loads(journal.read_text().splitlines()[-1]).get("kind") == "file"  # no state line: it was killed
    assert SHARD not in on_disk(dest)
    result = ok(call(ctx, "mf_download_checkpoint", run_id=run_id, dest=str(dest)))
    assert (result.files_kept, result.files_downloaded) == (4, 1) and on_disk(dest) == served(emulator, run_id)
    ctx.close()


# -- credentials -----------------------------------------------------------------------------------------


def test_credentials_that_expire_mid_download_are_refreshed_without_a_failure(
        frozen_ctx, emulator, rl_config, tmp_path, recorder, small_parts):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    emulator.state.storage.expire_after(9)  # listing, 5 HEADs, 3 parts: then the first credentials are refused
    result = ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")))
    assert emulator.state.storage.refusals.get("ExpiredToken", 0) >= 1
    assert result.credential_refreshes >= 1 and routes(recorder) == 1 + result.credential_refreshes
    assert result.md5_verified == 5 and on_disk(tmp_path / "c") == served(emulator, run_id)


def test_credentials_close_to_expiry_are_renewed_before_the_store_refuses_them(
        frozen_ctx, emulator, rl_config, tmp_path, recorder, fake_time, small_parts, monkeypatch):
    monkeypatch.setattr(ck, "WORKERS", 1)  # one part at a time: the parts after the first are signed after the jump
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    moved = []

    def late(done: float, total: float | None, message: str) -> None:  # 13 minutes pass after the first part
        if not moved:
            moved.append(True)
            fake_time.sleep(T.credential_seconds - 100)

    frozen_ctx.progress = late
    result = ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")))
    assert emulator.state.storage.refusals == {}  # never used past their expiry
    assert result.credential_refreshes == 1 and routes(recorder) == 2
    assert on_disk(tmp_path / "c") == served(emulator, run_id)


def test_no_credential_value_reaches_the_result_or_the_manifest(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    result = call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c"))
    secrets = [c.secret_access_key for c in emulator.state.storage.credentials.values()] + \
        [c.session_token for c in emulator.state.storage.credentials.values()]
    text = result.model_dump_json() + (tmp_path / "c" / ck.MANIFEST).read_text()
    assert secrets and not any(s in text for s in secrets)


# -- damage ------------------------------------------------------------------------------------------------


def test_a_file_changed_on_disk_is_fetched_again_and_only_it(frozen_ctx, emulator, rl_config, tmp_path, recorder):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    dest = tmp_path / "c"
    ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(dest)))
    target = dest / "trainer/__0_0.distcp"
    stat = target.stat()
    data = bytearray(target.read_bytes())
    data[100] ^= 0x01  # same size, same mtime: only the checksum tells
    target.write_bytes(bytes(data))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    before = len(s3_gets(recorder))
    result = ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(dest)))
    assert (result.refetched, result.files_downloaded, result.files_kept) == (1, 1, 4)
    assert result.fetched_bytes == len(data) and len(s3_gets(recorder)) - before == 1
    assert on_disk(dest) == served(emulator, run_id)


def test_bytes_that_do_not_match_the_store_checksum_are_never_kept(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    key = emulator.state.volume_prefix("research-data", TEAM_RESEARCH_ID) + f"runs/{run_id}/checkpoints/step_20/{SHARD}"
    emulator.state.storage.tamper(key)
    dest = tmp_path / "c"
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(dest)), "checksum_mismatch")
    assert SHARD in error.message and "mf_download_checkpoint" in error.fix
    assert SHARD not in on_disk(dest) and len(on_disk(dest)) == 4  # the good files are in place, the bad one not
    emulator.state.storage.tampered.discard(key)  # the store is mended
    result = ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(dest)))
    assert (result.files_downloaded, result.files_kept) == (1, 4) and on_disk(dest) == served(emulator, run_id)


def test_a_connection_cut_mid_part_is_retried_within_the_call(frozen_ctx, emulator, rl_config, tmp_path, fake_time):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    emulator.faults.cut(500_000, "GET", f"/_s3/*{SHARD}")
    result = ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")))
    assert emulator.faults.rules() == [] and fake_time.slept == [0.5]  # one wait, on the injected clock
    assert on_disk(tmp_path / "c") == served(emulator, run_id) and result.md5_verified == 5


@pytest.mark.parametrize("key", ["../../escape.bin", "trainer//double.bin", "trainer/./dot.bin",
                                 ".model-factory/manifest.jsonl", "bad\\name.bin"])
def test_an_unsafe_key_refuses_the_whole_checkpoint_before_anything_is_written(
        frozen_ctx, emulator, rl_config, tmp_path, key):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    emulator.state.put_object("research-data", f"runs/{run_id}/checkpoints/step_20/{key}", b"x" * 10,
                              team_id=TEAM_RESEARCH_ID)
    dest = tmp_path / "c"
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(dest)), "unsafe_path")
    assert "Nothing was written" in error.message and "prime volumes ls" in error.fix
    assert not dest.exists() and not (tmp_path / "escape.bin").exists()


def test_a_symbolic_link_inside_dest_is_refused(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    dest, elsewhere = tmp_path / "c", tmp_path / "elsewhere"
    dest.mkdir()
    elsewhere.mkdir()
    ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(dest)))
    (dest / "trainer/__0_0.distcp").unlink()
    (dest / "trainer").rename(tmp_path / "moved")
    (dest / "trainer").symlink_to(elsewhere)
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(dest)), "unsafe_path")
    assert "symbolic link" in error.message and not any(elsewhere.iterdir())


# -- what cannot be downloaded, and why --------------------------------------------------------------------


def test_a_run_without_a_volume_is_no_volume(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config, volume=None)
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")), "no_volume")
    assert "volume" in error.fix


def test_a_plan_without_a_volume_says_before_approval_that_its_checkpoints_cannot_be_downloaded(frozen_ctx, tmp_path):
    config = example(tmp_path)
    without = planned(frozen_ctx, config, team="personal")
    assert "Volume:        none (no checkpoint download without one)" in without.summary
    with_one = planned(frozen_ctx, config, team=TEAM_RESEARCH_ID, volume="research-data")
    assert "Volume:        research-data\n" in with_one.summary


def test_a_running_run_has_no_ready_checkpoint_yet(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config, after=T.queue_seconds + T.startup_seconds + 60)
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")),
                "checkpoint_not_ready")
    assert error.retryable and error.next_calls[0].tool == "mf_list_checkpoints"


def test_a_ready_checkpoint_not_synced_to_the_volume_yet_says_so(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config, after=SYNCED - T.volume_sync_seconds)
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")),
                "checkpoint_not_ready")
    assert error.retryable and "syncs" in error.message and not (tmp_path / "c").exists()


def test_a_step_without_a_checkpoint_is_not_found_with_the_steps_there_are(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c"), step=7),
                "not_found")
    assert "steps with one: 20" in error.message


def test_an_older_platform_without_the_route_points_at_prime_volumes_get(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    emulator.faults.status(404, "POST", "/training/volumes/*/transfer")
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")),
                "transfer_unavailable")
    assert f"PRIME_TEAM_ID={TEAM_RESEARCH_ID} prime volumes get research-data runs/{run_id}/" in error.fix


def test_a_live_read_write_session_names_the_session_to_stop(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    emulator.state.storage.open_session(emulator.state.volume_prefix("research-data", TEAM_RESEARCH_ID))
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")),
                "transfer_unavailable")
    assert "prime volumes stop research-data cvs" in error.fix


def test_a_volume_gone_from_the_team_is_volume_not_found(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    emulator.state.volumes = [v for v in emulator.state.volumes if v.name != "research-data"]
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")),
                "volume_not_found")
    assert error.next_calls[0].tool == "mf_list_volumes"


def test_a_refused_route_is_forbidden_with_the_teams_to_check(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    emulator.faults.status(403, "POST", "/training/volumes/*/transfer")
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")), "forbidden")
    assert error.next_calls[0].tool == "mf_list_teams"


def test_a_dest_that_holds_something_else_is_refused(frozen_ctx, emulator, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    err(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "busy")), "bad_arguments")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    ok(call(frozen_ctx, "mf_download_checkpoint", run_id=run_id, dest=str(tmp_path / "c")))
    other = volume_run(frozen_ctx, emulator, rl_config)
    error = err(call(frozen_ctx, "mf_download_checkpoint", run_id=other, dest=str(tmp_path / "c")), "bad_arguments")
    assert "another checkpoint" in error.message


# -- listings ---------------------------------------------------------------------------------------------------


def test_list_checkpoints_gives_the_folder_and_with_files_what_is_on_the_volume(frozen_ctx, emulator, rl_config):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    plain = ok(call(frozen_ctx, "mf_list_checkpoints", run_id=run_id))
    assert plain.volume == "research-data" and plain.checkpoints[0].path == f"runs/{run_id}/checkpoints/step_20/"
    assert plain.checkpoints[0].files is None and plain.next_calls[0].tool == "mf_download_checkpoint"
    counted = ok(call(frozen_ctx, "mf_list_checkpoints", run_id=run_id, files=True))
    row = counted.checkpoints[0]
    assert (row.files, row.stored_bytes) == (5, row.size_bytes)


def test_list_volumes_pages_a_folder_and_totals_what_is_under_it(frozen_ctx, emulator, rl_config):
    run_id = volume_run(frozen_ctx, emulator, rl_config)
    for i in range(60):
        emulator.state.put_object("research-data", f"datasets/many/{i:03d}.jsonl", b"{}\n", team_id=TEAM_RESEARCH_ID)
    top = ok(call(frozen_ctx, "mf_list_volumes", team=TEAM_RESEARCH_ID, volume="research-data")).listing
    assert [e.name for e in top.entries] == ["datasets/", "runs/"] and top.files == 65 and top.next_cursor is None
    first = ok(call(frozen_ctx, "mf_list_volumes", team=TEAM_RESEARCH_ID, volume="research-data",
                    path="datasets/many")).listing
    assert len(first.entries) == 50 and (first.files, first.bytes) == (60, 180) and first.next_cursor
    rest = ok(call(frozen_ctx, "mf_list_volumes", team=TEAM_RESEARCH_ID, volume="research-data",
                   path="datasets/many", cursor=first.next_cursor)).listing
    assert [e.name for e in first.entries + rest.entries] == [f"datasets/many/{i:03d}.jsonl" for i in range(60)]
    shard = ok(call(frozen_ctx, "mf_list_volumes", team=TEAM_RESEARCH_ID, volume="research-data",
                    path=f"runs/{run_id}/checkpoints/step_20/trainer/")).listing
    assert {e.name.rsplit("/", 1)[1]: e.size_bytes for e in shard.entries}["__2_0.distcp"] == 12 * 2**20
    err(call(frozen_ctx, "mf_list_volumes", team=TEAM_RESEARCH_ID, volume="research-data", path="../x"),
        "bad_arguments")
    err(call(frozen_ctx, "mf_list_volumes", team=TEAM_RESEARCH_ID, volume="nope"), "volume_not_found")


def test_only_a_storage_read_loads_the_s3_client(emulator, mf_env, frozen_ctx, rl_config, tmp_path):
    run_id = volume_run(frozen_ctx, emulator, rl_config)

    def imported(*args: str) -> set[str]:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "skill", *args, "--json"], env=mf_env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
        return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}

    for command in (["get-run", run_id], ["list-checkpoints", run_id], ["list-volumes", "--team", TEAM_RESEARCH_ID]):
        assert imported(*command).isdisjoint({"boto3", "botocore", "s3transfer"}), command
    assert {"boto3", "botocore"} <= imported("download-checkpoint", run_id, str(tmp_path / "c"))


def test_wait_for_run_at_the_end_of_a_run_with_a_volume_offers_its_checkpoint_and_without_one_does_not(
        frozen_ctx, emulator, rl_config):
    with_volume = volume_run(frozen_ctx, emulator, rl_config)
    done = ok(call(frozen_ctx, "mf_wait_for_run", run_id=with_volume, timeout_seconds=1))
    assert done.status == "COMPLETED" and "its latest checkpoint (volume" in done.next_step
    assert [c.tool for c in done.next_calls][-1] == "mf_download_checkpoint"
    without = volume_run(frozen_ctx, emulator, rl_config, volume=None)
    done = ok(call(frozen_ctx, "mf_wait_for_run", run_id=without, timeout_seconds=1))
    assert "mf_download_checkpoint" not in [c.tool for c in done.next_calls] and "checkpoint" not in done.next_step
