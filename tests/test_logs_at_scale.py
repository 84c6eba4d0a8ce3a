"""Whole-run log tools on runs that log more than one read of the logs API returns, over real HTTP
against the emulator's ``long_run`` scenario (lines generated on demand, clock frozen and moved):
mf_summarize_logs finds every error signature of a day-long run within 6,000 characters, counts
errors beyond the 5,000-line cap exactly by time slices, and names every cap it could not get
past; mf_export_logs writes every line of every component, scrubbed, with a manifest, resumes,
and reports progress.
"""

from __future__ import annotations

import hashlib
import json
import math

import pytest
from _helpers import call, ok

from skill import registry
from skill.emulator.logvolume import SIGNATURES, STORM_MESSAGE
from tools.errors import ToolError
from tools.monitor import normalise

QUEUE, STARTUP, FINALIZE = 60.0, 90.0, 10.0
HOUR, DAY = 3600.0, 86400.0
FAKE_WANDB_KEY = "wandb_v1_" + "FAKE" * 19 + "Ab"  # 86 characters, the current W&B key format


@pytest.fixture
def long_run(launch, emulator):
    """``long_run(hours=..., **params)``: a COMPLETED run stretched over ``hours``, ``after`` seconds after its end."""

    def start(hours: float, *, after: float = 60.0, scenarios: tuple[str, ...] = (), wandb_key: str | None = None,
              **params) -> str:
        emulator.state.set_scenario("long_run", hours=hours, **params)
        for name in scenarios:
            emulator.state.set_scenario(name)
        run_id = launch(after=QUEUE + STARTUP + hours * HOUR + FINALIZE + after, wandb_api_key=wandb_key)
        assert emulator.state.run(run_id).status == "COMPLETED"
        return run_id

    return start


# -- mf_summarize_logs -----------------------------------------------------------------------------


def test_a_day_long_run_s_digest_names_every_signature_with_counts_times_and_tracebacks(frozen_ctx, long_run):
    run_id = long_run(23)  # 210,000 lines within the API's 24 h window
    result = ok(call(frozen_ctx, "mf_summarize_logs", run_id=run_id))
    assert len(result.model_dump_json()) <= 6000
    assert result.covers_whole_run and result.looked_back_seconds >= 23 * HOUR
    expected = {normalise(sig.message.format(step=1, n=1, v=1, tokens=1)): sig for sig in SIGNATURES}
    assert {s.pattern for s in result.errors} == set(expected) and len(expected) == 8
    for sig in result.errors:
        template = expected[sig.pattern]
        component = template.component if template.component != "env-server" else "env-server/reverse-text"
        assert (sig.component, sig.count, sig.count_is_lower_bound) == (component, template.count, False)
        assert sig.first_seen < sig.last_seen
        assert (sig.traceback is not None) == (template.traceback is not None)
        if sig.traceback:
            assert sig.traceback.splitlines()[-1] == template.traceback.splitlines()[-1]
    assert [s.first_seen for s in result.errors] == sorted(s.first_seen for s in result.errors)
    assert all(r.read and r.requests == 2 for r in result.streams)  # one ERROR read and one WARNING read each


def test_errors_beyond_one_read_s_cap_are_counted_exactly_by_time_slices(frozen_ctx, long_run):
    run_id = long_run(23, storm=12000, storm_seconds=HOUR)
    result = ok(call(frozen_ctx, "mf_summarize_logs", run_id=run_id, components=["orchestrator"]))
    storm = next(s for s in result.errors if s.pattern.startswith(STORM_MESSAGE.split("{")[0]))
    assert (storm.count, storm.count_is_lower_bound) == (12000, False)
    assert result.covers_whole_run and not any("ERROR" in cap for cap in result.caps)
    [stream] = result.streams
    assert stream.error_lines == 12000 + 30 and stream.requests > 3 and "time slices" in stream.note


def test_a_minute_no_read_can_cover_is_a_cap_whose_counts_are_lower_bounds(frozen_ctx, long_run):
    run_id = long_run(23, storm=12000, storm_seconds=10)
    result = ok(call(frozen_ctx, "mf_summarize_logs", run_id=run_id, components=["orchestrator"]))
    storm = next(s for s in result.errors if s.pattern.startswith(STORM_MESSAGE.split("{")[0]))
    assert storm.count_is_lower_bound and 5000 <= storm.count < 12000
    assert not result.covers_whole_run
    assert any("more than 5,000 ERROR lines within a minute" in cap for cap in result.caps)
    rollout = next(s for s in result.errors if s.pattern.startswith("Rollout request"))
    assert (rollout.count, rollout.count_is_lower_bound) == (30, False)  # outside the storm's minute: exact


def test_a_run_longer_than_a_day_says_its_first_hours_are_beyond_the_api(frozen_ctx, long_run):
    run_id = long_run(30)  # the OOMs (4-10% of 30 h) happened more than 24 h ago
    result = ok(call(frozen_ctx, "mf_summarize_logs", run_id=run_id))
    assert result.looked_back_seconds == DAY and not result.covers_whole_run
    assert any("lines older than 24 h" in cap for cap in result.caps)
    assert not any(s.pattern.startswith("torch.OutOfMemoryError") for s in result.errors)
    assert any(s.pattern.startswith("Gradient norm is NaN") for s in result.errors)  # late errors still found


def test_a_run_that_ended_days_ago_is_digested_from_its_newest_lines(frozen_ctx, long_run):
    run_id = long_run(2, after=3 * DAY)
    result = ok(call(frozen_ctx, "mf_summarize_logs", run_id=run_id))
    assert result.looked_back_seconds is None and not result.covers_whole_run
    assert any("ended" in cap and "newest 5,000 lines" in cap for cap in result.caps)
    assert all(r.requests == 1 for r in result.streams)


# -- mf_export_logs --------------------------------------------------------------------------------


def emulator_lines(emulator, run_id: str, component: str, env_name: str | None) -> int:
    """Every line the emulator holds for a stream: stored, and generated until the run's end."""
    run = emulator.state.run(run_id)
    stored = sum(1 for ln in run.logs if ln.component == component and (env_name is None or ln.env_name == env_name))
    volume = run.log_volume()
    return stored + sum(1 for _ in volume.lines_desc(component, env_name, -math.inf, run.ended_at, None))


def test_export_writes_every_line_of_every_component_scrubbed_with_a_true_manifest(frozen_ctx, emulator, long_run,
                                                                                     tmp_path):
    # the launching shell's key: the scrubber knows it
    frozen_ctx.env = {**frozen_ctx.env, "WANDB_API_KEY": FAKE_WANDB_KEY}
    run_id = long_run(2, lines=20000, scenarios=("echo_wandb_key",), wandb_key=FAKE_WANDB_KEY)
    assert any(FAKE_WANDB_KEY in ln.text for ln in emulator.state.run(run_id).logs)  # the platform leaks it
    reports = []
    frozen_ctx.progress = lambda done, total, message: reports.append((done, total))
    dest = tmp_path / "logs"
    result = ok(call(frozen_ctx, "mf_export_logs", run_id=run_id, dest=str(dest)))
    assert result.complete and reports == [(1, 4), (2, 4), (3, 4), (4, 4)]
    names = {"orchestrator": ("orchestrator", None), "trainer": ("trainer", None), "inference": ("inference", None),
             "env-server/reverse-text": ("env-server", "reverse-text")}
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["run_id"] == run_id and [s["component"] for s in manifest["streams"]] == list(names)
    for stream in result.streams:
        data = (dest / stream.file).read_bytes()
        lines = data.decode().splitlines()
        assert stream.lines == len(lines) == emulator_lines(emulator, run_id, *names[stream.component])
        assert stream.complete and stream.cut == [] and len(set(lines)) == len(lines)
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (stream.sha256, stream.bytes)
        stamps = [json.loads(line.split(": ", 1)[-1] if line.startswith("[") else line)["timestamp"] for line in lines]
        assert stamps == sorted(stamps) and (stream.first_timestamp, stream.last_timestamp) == (stamps[0], stamps[-1])
        assert FAKE_WANDB_KEY not in data.decode() and "FAKEFAKEFAKE" not in data.decode()
    echo = [line for line in (dest / "trainer.log").read_text().splitlines() if "logging in with api key" in line]
    assert len(echo) == 1 and "[REDACTED:" in echo[0]  # the line is kept, the key is not
    assert sorted(p.name for p in dest.iterdir()) == ["env-server-reverse-text.log", "inference.log", "manifest.json",
                                                      "orchestrator.log", "trainer.log"]


def test_a_stream_over_the_read_cap_is_exported_whole_in_time_slices(frozen_ctx, emulator, long_run, tmp_path):
    run_id = long_run(3, lines=60000)  # the trainer logs 18,000 lines: over 5,000 in an hour
    result = ok(call(frozen_ctx, "mf_export_logs", run_id=run_id, dest=str(tmp_path / "logs"), components=["trainer"]))
    [stream] = result.streams
    assert stream.complete and stream.requests > 4 and "time slices" in stream.note
    assert stream.lines == emulator_lines(emulator, run_id, "trainer", None) > 18000


def test_an_interrupted_export_resumes_keeping_the_files_it_finished(frozen_ctx, emulator, long_run, tmp_path):
    run_id = long_run(1, lines=4000)
    dest = tmp_path / "logs"
    emulator.faults.status(503, "GET", f"/rft/runs/{run_id}/logs", skip=2, times=None)  # the third stream fails
    failed = registry.call_tool("mf_export_logs", {"run_id": run_id, "dest": str(dest)}, frozen_ctx)
    assert isinstance(failed, ToolError) and failed.code == "unavailable" and failed.retryable
    assert failed.next_calls[0].tool == "mf_export_logs"
    kept = json.loads((dest / "manifest.json").read_text())["streams"]
    assert [s["component"] for s in kept] == ["orchestrator", "trainer"]
    emulator.faults.clear()
    done = ok(call(frozen_ctx, "mf_export_logs", run_id=run_id, dest=str(dest)))
    assert done.complete and [s.kept_from_earlier for s in done.streams] == [True, True, False, False]
    (dest / "trainer.log").write_text("edited\n")  # a file changed since: read again, never trusted
    again = ok(call(frozen_ctx, "mf_export_logs", run_id=run_id, dest=str(dest)))
    assert [s.kept_from_earlier for s in again.streams] == [True, False, True, True]
    assert (dest / "trainer.log").read_text() != "edited\n" and again.written_bytes == again.streams[1].bytes


def test_export_refuses_a_folder_it_did_not_write(frozen_ctx, long_run, tmp_path):
    run_id = long_run(1, lines=1000)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    refused = registry.call_tool("mf_export_logs", {"run_id": run_id, "dest": str(busy)}, frozen_ctx)
    assert isinstance(refused, ToolError) and refused.code == "bad_arguments"
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
