"""Log tools: parsing as ``prime train logs`` does, mf_get_logs filters, windows and budget, a
wrong env-server name, the not-started path, and mf_summarize_logs on the crash-loop and failure
scenarios (a day-long run: test_logs_at_scale.py).

Real HTTP against the emulator (clock frozen, moved with ``advance``); runs are created from
the bundled prime-rl example ``basic/reverse-text/rl.toml``.
"""

from __future__ import annotations

import json
import re

import pytest
from _helpers import call, past_step, size

from skill.emulator.logs import make_line
from tools import monitor
from tools.core import OUTPUT_BUDGET_CHARS
from tools.errors import ToolError

QUEUE, STARTUP, STEP = 60.0, 90.0, 30.0


# -- parsing (pure) ---------------------------------------------------------------------------


def test_json_entries_prefixes_progress_and_tqdm_as_the_cli():
    text = "\n".join([
        '{"timestamp":"2026-08-20T12:06:01.120Z","level":"info","message":"Step 12 | reward 0.41",'
        '"tag":"orchestrator"}',
        '{"timestamp":"2026-08-20T12:06:02Z","level":"info","type":"progress","message":"42%"}',
        '[rank0]: {"timestamp":"2026-08-20T12:06:03Z","level":"WARNING","message":"slow batch"}',
        '[adminlog] (Worker pid=123) {"timestamp":"t","level":"error","message":{"k":1},"exception":"Traceback x"}',
        "\x1b[31mplain text line\x1b[0m",
        "Loading shards:  45%|████▌     | 9/20 [00:03<00:04]",
        "Loading shards: 100%|██████████| 20/20 [00:07<00:00]",
        '{"timestamp":"t","level":"INFO"}',
        "",
    ])
    parsed = monitor.parse_logs(text)
    assert parsed.hidden_progress == 2
    first, warn, err, plain, done, no_message = parsed.lines
    assert (first.level, first.message, first.source) == ("INFO", "Step 12 | reward 0.41", "orchestrator")
    assert (warn.level, warn.source, warn.message) == ("WARNING", "rank0", "slow batch")
    assert (err.level, err.source, err.message, err.exception) == ("ERROR", "adminlog Worker pid=123", '{"k": 1}',
                                                                    "Traceback x")
    assert plain.message == "plain text line" and plain.level is None and not plain.structured
    assert "100%" in done.message
    assert not no_message.structured  # a JSON object without "message" is a plain line, as in the CLI


def test_plain_traceback_is_one_error_entry_and_levels_are_read_from_plain_lines():
    text = "\n".join([
        "2026-08-20 12:00:00 WARNING low disk",
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "    main()",
        "RuntimeError: CUDA error: device-side assert triggered",
        "after the traceback",
    ])
    lines = monitor.parse_logs(text).lines
    assert [ln.level for ln in lines] == ["WARNING", "ERROR", None]
    assert lines[1].message == "RuntimeError: CUDA error: device-side assert triggered"
    assert lines[1].exception.splitlines()[0] == "Traceback (most recent call last):"
    assert lines[1].exception.splitlines()[-1] == lines[1].message


def test_normalise_masks_numbers_ids_and_times_so_repeats_group():
    a = monitor.normalise("Back-off restarting failed container env-7 (restart 12) at 2026-08-20T12:00:01Z")
    b = monitor.normalise("Back-off restarting failed container env-7 (restart 13) at 2026-08-20T12:05:09Z")
    assert a == b == "Back-off restarting failed container env-<n> (restart <n>) at <time>"
    assert monitor.normalise("run cabcdefghijklmnopqrstuvw1 upload 3f0c00aa11bb") == "run <id> upload <hex>"
    table = monitor.Signatures()
    for line in monitor.parse_logs("\n".join(json.dumps({"timestamp": f"t{i}", "level": "ERROR", "message":
                                                          f"restart {i}"}) for i in range(5))).lines:
        table.add("trainer", line)
    assert [(s.component, s.pattern, s.count, s.first_seen, s.last_seen) for s in table.found()] == [
        ("trainer", "restart <n>", 5, "t0", "t4")]


# -- mf_get_logs ----------------------------------------------------------------------------------


def test_not_started_is_a_normal_result_after_one_request(frozen_ctx, emulator, launch):
    run_id = launch()
    counter = emulator.faults.delay(0, "GET", "/rft/runs/*/logs", times=None)  # counts requests, changes nothing
    result = call(frozen_ctx, "mf_get_logs", run_id=run_id)
    assert not isinstance(result, ToolError)
    assert result.available is False and result.lines == []
    assert [(c.tool, c.arguments) for c in result.next_calls] == [("mf_wait_for_run", {"run_id": run_id,
                                                                                      "until": "running"})]
    assert str(result.next_calls[0]) in result.note
    assert counter.hits == 1


def test_unknown_run_is_not_found_with_a_fix(frozen_ctx):
    result = call(frozen_ctx, "mf_get_logs", run_id="cnothere000000000000000000")
    assert isinstance(result, ToolError) and result.code == "not_found" and "mf_list_runs" in result.fix


def test_lines_are_parsed_and_progress_hidden(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(4))
    orch = call(frozen_ctx, "mf_get_logs", run_id=run_id, tail_lines=50)
    assert orch.available and orch.hidden_progress_lines == 4  # one progress entry per step
    assert not any(re.fullmatch(r"\d+%", ln.message) for ln in orch.lines)
    assert orch.received_lines == len(orch.lines) + orch.hidden_progress_lines
    assert orch.lines[-1].message.startswith("Step 4/20 | reward")
    trainer = call(frozen_ctx, "mf_get_logs", run_id=run_id, component="trainer", tail_lines=2)
    assert [ln.message.split(" |")[0] for ln in trainer.lines] == ["Step 3/20", "Step 4/20"]
    assert all(ln.source == "rank0 trainer" and ln.level == "INFO" and ln.component == "trainer"
               for ln in trainer.lines)
    env = call(frozen_ctx, "mf_get_logs", run_id=run_id, env_name="reverse-text", tail_lines=1)
    assert env.component == "env-server" and env.lines[0].component == "env-server/reverse-text"
    assert env.lines[0].message == "reverse-text: served 128 rollouts for step 4"


def test_filters_level_search_regex_since(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(14))
    warnings = call(frozen_ctx, "mf_get_logs", run_id=run_id, level="WARNING", since_seconds=3600)
    assert [ln.message for ln in warnings.lines] == [f"Slow rollout batch at step {k}: 3 rollouts exceeded 30s"
                                                      for k in (7, 14)]
    found = call(frozen_ctx, "mf_get_logs", run_id=run_id, search="Step 1", since_seconds=3600)
    assert {ln.message.split(" |")[0] for ln in found.lines} == {"Step 1/20", "Step 10/20", "Step 11/20",
                                                                 "Step 12/20", "Step 13/20", "Step 14/20"}
    regex = call(frozen_ctx, "mf_get_logs", run_id=run_id, component="trainer", search=r"Step (3|5)/", regex=True,
                 since_seconds=3600)
    assert [ln.message.split(" |")[0] for ln in regex.lines] == ["Step 3/20", "Step 5/20"]
    recent = call(frozen_ctx, "mf_get_logs", run_id=run_id, component="trainer", since_seconds=60)
    assert [ln.message.split(" |")[0] for ln in recent.lines] == ["Step 13/20", "Step 14/20"]
    none = call(frozen_ctx, "mf_get_logs", run_id=run_id, search="no such text anywhere", since_seconds=3600)
    assert none.lines == [] and none.window_seconds == 3600 and none.note.startswith("No log lines matched in the "
                                                                                      "last 1 h")


@pytest.mark.parametrize("arguments, path", [
    ({"component": "env-server"}, ""),
    ({"regex": True}, ""),
    ({"env_name": "reverse-text", "component": "trainer"}, ""),
    ({"since_seconds": 30}, "since_seconds"),
    ({"tail_lines": 5000}, "tail_lines"),
    ({"level": "LOUD"}, "level"),
])
def test_arguments_are_checked_like_the_cli(frozen_ctx, arguments, path):
    result = call(frozen_ctx, "mf_get_logs", run_id="crun", **arguments)
    assert isinstance(result, ToolError) and result.code == "bad_arguments"
    assert result.fields and result.fields[0].path == path


def test_plain_lines_tqdm_and_tracebacks_from_the_platform(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(1))
    run = emulator.state.run(run_id)
    now = emulator.state.now()
    iso = emulator.state.clock.iso(now)
    raw = ["Loading shards:  40%|████      | 4/10", "Loading shards: 100%|██████████| 10/10",
           "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad shard",
           f'(Worker pid=77) {{"timestamp":"{iso}","level":"ERROR","message":"worker died","tag":"trainer"}}']
    for text in raw:
        line = make_line(now, iso, "trainer", "INFO", "unused")
        line.text = text
        run.logs.append(line)
    result = call(frozen_ctx, "mf_get_logs", run_id=run_id, component="trainer", tail_lines=4)
    assert [ln.message for ln in result.lines][-3:] == ["Loading shards: 100%|██████████| 10/10",
                                                       "ValueError: bad shard", "worker died"]
    assert result.hidden_progress_lines == 1
    tb = result.lines[-2]
    assert tb.level == "ERROR" and tb.exception.startswith("Traceback") and tb.timestamp is None
    assert result.lines[-1].source == "Worker pid=77 trainer"


def test_output_budget_keeps_the_newest_lines(frozen_ctx, emulator, launch):
    run_id = launch("crash_loop", at_step=1)
    emulator.state.advance(past_step(1) + 3000)
    result = call(frozen_ctx, "mf_get_logs", run_id=run_id, env_name="reverse-text", tail_lines=1000)
    newest = call(frozen_ctx, "mf_get_logs", run_id=run_id, env_name="reverse-text", tail_lines=1)
    assert result.received_lines > 150
    assert size(result) <= OUTPUT_BUDGET_CHARS
    assert result.truncated and result.omitted > 0 and "mf_summarize_logs" in result.narrow_hint
    assert result.omitted + len(result.lines) == result.received_lines  # no hidden lines here
    assert result.lines[-1] == newest.lines[0]


def test_a_filtered_read_after_the_run_ended_says_the_window_that_applied_and_how_to_widen_it(frozen_ctx, emulator,
                                                                                              launch):
    run_id = launch()
    emulator.state.advance(past_step(20) + 10 + 3600)  # COMPLETED an hour ago
    result = call(frozen_ctx, "mf_get_logs", run_id=run_id, level="WARNING")
    assert result.lines == [] and result.window_seconds == 900
    assert ("No log lines matched in the last 15 min (the window of filtered reads, the server's default)"
            in result.note)
    assert "The run ended 1 h ago, before this window." in result.note
    [wider] = result.next_calls
    assert wider.tool == "mf_get_logs" and wider.arguments["level"] == "WARNING"
    assert wider.arguments["since_seconds"] >= 3600 + 20 * STEP and str(wider) in result.note
    widened = call(frozen_ctx, "mf_get_logs", **wider.arguments)
    assert [ln.level for ln in widened.lines] == ["WARNING"] * 2 and widened.window_seconds == wider.arguments[
        "since_seconds"]


def test_a_run_that_ended_beyond_a_day_is_read_unfiltered(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(20) + 10 + 2 * 86400)
    result = call(frozen_ctx, "mf_get_logs", run_id=run_id, level="WARNING", since_seconds=86400)
    assert result.lines == [] and "widest window the logs API searches (24 h)" in result.note
    [unfiltered] = result.next_calls
    assert "level" not in unfiltered.arguments and "since_seconds" not in unfiltered.arguments
    assert call(frozen_ctx, "mf_get_logs", **unfiltered.arguments).lines  # the newest lines, whatever their age


def test_a_wrong_env_server_name_lists_the_run_s_env_servers(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(2))
    wrong = call(frozen_ctx, "mf_get_logs", run_id=run_id, env_name="reverse-txt")
    assert isinstance(wrong, ToolError) and wrong.code == "not_found"
    assert "has no env server named 'reverse-txt'. Its env servers: reverse-text." in wrong.message
    assert [c.arguments["env_name"] for c in wrong.next_calls] == ["reverse-text"]
    run_gone = call(frozen_ctx, "mf_get_logs", run_id="cnothere000000000000000000", env_name="reverse-text")
    assert isinstance(run_gone, ToolError) and run_gone.code == "not_found" and "No run" in run_gone.message
    assert "env server" not in run_gone.message


def test_a_read_that_hits_its_tail_says_older_lines_were_left_out(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(6))
    result = call(frozen_ctx, "mf_get_logs", run_id=run_id, component="trainer", tail_lines=3)
    assert len(result.lines) == 3 and "capped at tail_lines=3" in result.note


# -- mf_summarize_logs (short runs; a day-long run in test_logs_at_scale.py) --------------------------


def by_pattern(result) -> dict:
    return {(s.component, s.pattern): s for s in result.errors + result.warnings}


def test_summary_of_a_crash_looping_env_server(frozen_ctx, emulator, launch):
    run_id = launch("crash_loop", at_step=2)
    emulator.state.advance(past_step(2) + 600)
    result = call(frozen_ctx, "mf_summarize_logs", run_id=run_id)
    assert [s.component for s in result.streams] == ["orchestrator", "trainer", "inference", "env-server/reverse-text"]
    stored = [json.loads(ln.text)["message"] for ln in emulator.state.run(run_id).logs
              if ln.component == "env-server" and ln.level == "ERROR"]
    env = next(s for s in result.streams if s.component == "env-server/reverse-text")
    assert env.error_lines == len(stored) > 10
    found = by_pattern(result)
    backoff = found[("env-server/reverse-text", "Back-off restarting failed container env-server-reverse-text "
                                                "(restart <n>)")]
    assert backoff.count == sum(1 for m in stored if m.startswith("Back-off restarting")) > 5
    assert backoff.first_seen < backoff.last_seen
    assert any("ModuleNotFoundError: No module named 'reverse_text'" in (s.traceback or "") for s in result.errors)
    waiting = found[("orchestrator", "Still waiting for env server reverse-text (<n> attempts)")]
    assert waiting.level == "WARNING" and waiting.count > 1
    assert result.covers_whole_run and result.caps == [] and size(result) <= 6000


def test_summary_of_a_failure_names_the_oom(frozen_ctx, emulator, launch):
    run_id = launch("fail", at_step=4)
    emulator.state.advance(past_step(5))
    result = call(frozen_ctx, "mf_summarize_logs", run_id=run_id, components=["trainer", "orchestrator"])
    assert result.status == "FAILED" and [s.component for s in result.streams] == ["trainer", "orchestrator"]
    trainer_errors = [s for s in result.errors if s.component == "trainer"]
    assert sum(s.count for s in trainer_errors) == 2
    assert any(s.pattern.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate <n> GiB")
               for s in trainer_errors)
    assert [s.example or s.pattern for s in result.errors if s.component == "orchestrator"] == [
        "Trainer exited unexpectedly during step 4: trainer pod OOMKilled"]


def test_summary_stays_within_6000_characters_on_hundreds_of_distinct_errors(frozen_ctx, emulator, launch):
    run_id = launch("crash_loop", at_step=1)
    run = emulator.state.run(run_id)
    emulator.state.advance(past_step(1) + 3000)
    now = emulator.state.now()
    for i in range(300):  # many distinct error messages, each with a long example
        run.logs.append(make_line(now, emulator.state.clock.iso(now), "trainer", "ERROR",
                                  f"distinct failure kind {'x' * (i % 40)} " + "detail " * 60))
    result = call(frozen_ctx, "mf_summarize_logs", run_id=run_id, components=["trainer", "env-server"])
    assert size(result) <= 6000
    assert result.truncated and result.omitted > 0 and "mf_export_logs" in result.narrow_hint
    trainer = next(s for s in result.streams if s.component == "trainer")
    assert trainer.error_lines == 300 and len([s for s in result.errors if s.component == "trainer"]) < 40


def test_summary_before_start_reports_each_component_unread(frozen_ctx, launch):
    run_id = launch()
    result = call(frozen_ctx, "mf_summarize_logs", run_id=run_id)
    assert result.status == "QUEUED" and not result.covers_whole_run
    assert [s.read for s in result.streams] == [False] * 4
    assert all(s.note == "not started yet: no logs" for s in result.streams)
