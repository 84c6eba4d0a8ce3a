"""At the terminal: a progress bar in ASCII under ``LANG=C``; the ``mfc_`` code and the dashboard URL
whole at 60 columns; no "check it is progressing" for a run that has ended; times that say their
zone; MCP progress a few notifications a second; an env file that is a device and a config of 200 MB
named for what they are. Real HTTP against the emulator, the CLI at a pseudo-terminal (in a new
process: what is tested is what a terminal receives), the MCP server through the in-memory client.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import anyio
import pytest
from _helpers import (
    CHALLENGE,
    CLI,
    EXAMPLE,
    TOKEN,
    approved_launch,
    call,
    cli_env,
    err,
    in_terminal,
    make_ctx,
    ok,
    planned,
)

from skill import terminal
from tools.core import Context

DONE = 60 + 90 + 30 * 20 + 10 + 5  # queued + start-up + 20 steps + finalize + ingest, simulated seconds
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def person(emulator, tmp_path: Path, **extra: str) -> dict[str, str]:
    """A person's shell on the emulator (home and state under ``tmp_path``), the dashboard on the emulator."""
    for folder in ("home", "state"):
        (tmp_path / folder).mkdir(exist_ok=True)
    return cli_env(emulator, tmp_path / "home", tmp_path / "state", PRIME_FRONTEND_URL=emulator.base_url, **extra)


# -- a progress bar the locale can show -------------------------------------------------------------


@pytest.mark.parametrize(("locale", "unicode"), [
    ({"LANG": "C"}, False),
    ({"LANG": "POSIX"}, False),
    ({"LANG": "en_US.UTF-8", "LC_ALL": "C"}, False),  # LC_ALL wins
    ({"LANG": "C", "LC_CTYPE": "C.UTF-8"}, False),  # what Python's own C-locale coercion sets
    ({"LANG": "C.UTF-8"}, True),
    ({"LANG": "C", "LC_CTYPE": "en_US.utf8"}, True),
])
def test_the_locale_says_whether_a_terminal_gets_unicode(locale, unicode):
    class Stream:
        encoding = "utf-8"

    assert terminal.unicode_ok(Stream(), locale) is unicode


@pytest.mark.parametrize(("locale", "bar"), [({"LANG": "C"}, False), ({"LANG": "C.UTF-8"}, True)])
def test_the_download_progress_bar_is_ascii_under_lang_c(emulator, launch, tmp_path, locale, bar):
    run_id = launch("many_traces", count=400, trace_bytes=2048, after=DONE)
    env = {k: v for k, v in person(emulator, tmp_path).items() if not k.startswith(("LC_", "LANG"))} | locale
    code, out = in_terminal([CLI, "download-traces", run_id, str(tmp_path / "dl")], env, tmp_path, timeout=300)
    assert code == 0, out
    drawn = ANSI.sub("", out)
    assert ("━" in drawn) is bar and drawn.isascii() is not bar, drawn[-400:]
    assert "traces" in drawn  # the bar was drawn, in one alphabet or the other


# -- 60 columns: what a person copies stays whole ------------------------------------------------


def test_at_60_columns_the_code_and_the_dashboard_url_are_whole_lines(emulator, tmp_path):
    env = person(emulator, tmp_path)
    ctx = Context(env=env, home=tmp_path / "home", state_dir=tmp_path / "state")
    plan = planned(ctx, EXAMPLE, team="personal")
    code, out = in_terminal([CLI, "approve", plan.plan_id], env, tmp_path, CHALLENGE, columns=60)
    token = TOKEN.search(out)[0]
    assert code == 0 and token + "\n" in out and "\n" + token in out.replace("\n  " + token, "")  # no indent
    code, out = in_terminal([CLI, "dispatch-run", plan.plan_id, "--confirmation", token], env, tmp_path, columns=60)
    run_id = re.search(r"run (c[a-z0-9]{24})", out)[1]
    url = f"{emulator.base_url}/dashboard/training/{run_id}"
    assert code == 0 and f"\n{url}\n" in ANSI.sub("", out), out
    code, out = in_terminal([CLI, "get-run", run_id], env, tmp_path, columns=60)
    assert f"\n{url}\n" in ANSI.sub("", out), out
    ctx.close()


def test_a_lone_word_too_wide_for_its_indent_moves_left_and_prose_still_wraps():
    code = "mfc_plan_36336ce60300_6b7b110ddf1f1f27d7ed745cfe570d8146e47c7d"
    assert terminal.wrap(code, 60, "  ", first_indent="  ") == [code]
    assert terminal.wrap("x" * 57, 60, "    ", first_indent="    ") == ["   " + "x" * 57]
    assert terminal.wrap("a few words that fit", 60, "  ", first_indent="  ") == ["  a few words that fit"]


# -- a run that has ended is not "progressing" ---------------------------------------------------


@pytest.mark.parametrize("ends", ["completed", "stopped"])
def test_spend_of_a_run_that_has_ended_points_at_its_report_not_at_its_progress(emulator, tmp_path, ends):
    ctx = make_ctx(emulator, tmp_path)
    _, run = approved_launch(ctx, EXAMPLE)
    emulator.state.advance(300 if ends == "stopped" else DONE)
    if ends == "stopped":
        ctx.platform().stop_run(run.run_id)
        emulator.state.advance(60)
    spend = ok(call(ctx, "mf_get_spend", run_id=run.run_id))
    assert "progressing" not in spend.next_step and [c.tool for c in spend.next_calls] == ["mf_run_report"]
    assert "in all" in spend.summary and "so far" not in spend.summary
    progress = ok(call(ctx, "mf_check_progress", run_id=run.run_id))
    assert progress.terminal and "progressing" not in progress.next_step
    (tmp_path / "other").mkdir()
    running = make_ctx(emulator, tmp_path / "other")
    _, live = approved_launch(running, EXAMPLE)
    emulator.state.advance(400)
    assert "progressing" in ok(call(running, "mf_get_spend", run_id=live.run_id)).next_step  # still watched
    ctx.close(), running.close()


# -- times say their zone ----------------------------------------------------------------------


def test_times_at_the_terminal_say_utc(emulator, launch, tmp_path):
    run_id = launch(after=DONE)
    env = person(emulator, tmp_path)
    for args in (["get-run", run_id], ["list-runs"], ["list-checkpoints", run_id]):
        code, out = in_terminal([CLI, *args], env, tmp_path, columns=120)
        text = ANSI.sub("", out)
        zoneless = re.findall(r"\d\d:\d\d:\d\d(?!(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d|\s+UTC))", text)
        assert code == 0 and " UTC" in text and zoneless == [], (args, zoneless, text[-600:])


# -- MCP progress: a few notifications a second --------------------------------------------------


class StepClock:
    """A clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.mark.parametrize(("step", "most"), [(0.0, 2), (1.0, 500)])
def test_mcp_download_progress_is_throttled_to_a_few_notifications_a_second(emulator, launch, tmp_path, step,
                                                                             most):
    """500 traces on a clock that does not move: the first and the last notification; on a clock that moves
    a second each time it is read: every one (the interval is on the call Context's clock)."""
    from mcp import Client

    from skill.mcp_server import build_server

    run_id = launch("many_traces", count=500, trace_bytes=2048, after=DONE)
    clock = StepClock(step)

    def context() -> Context:
        return make_ctx(emulator, tmp_path, clock=clock)

    updates: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        updates.append(done)

    async def main() -> object:
        async with Client(build_server(context), mode="legacy") as client:
            return await client.call_tool("mf_download_traces", {"run_id": run_id, "dest": str(tmp_path / "dl"),
                                                                 "include_episodes": False},
                                          progress_callback=progress)

    result = anyio.run(main)
    assert result.is_error is False, result.content[0].text
    assert updates and updates == sorted(set(updates)) and updates[-1] == 500  # the last one always
    assert len(updates) <= most and (step < 1.0 or len(updates) > 250)  # seconds apart: (nearly) every one


# -- a device as an env file, a config of 200 MB ------------------------------------------------


@pytest.mark.parametrize("kind", ["device", "fifo", "folder"])
def test_an_env_file_that_is_not_a_file_says_so_and_offers_the_plan_without_it(frozen_ctx, tmp_path, kind):
    path = {"device": Path("/dev/zero"), "fifo": tmp_path / "pipe.env", "folder": tmp_path / "envs"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    good = tmp_path / "good.env"
    good.write_text("HF_TOKEN=fake-hf-token-value\n")
    refused = err(call(frozen_ctx, "mf_plan_run", config_path=str(EXAMPLE), team="personal",
                       env_files=[str(good), str(path)]), "env_file_invalid")
    assert "not found" not in refused.message and ("not a regular file" in refused.message
                                                     or "is a folder" in refused.message)
    (again,) = refused.next_calls
    assert again.arguments["env_files"] == [str(good)] and str(path) not in str(again)
    assert ok(call(frozen_ctx, again.tool, **again.arguments)).secret_names == ["HF_TOKEN"]


def test_a_missing_env_file_named_by_the_config_asks_to_fix_the_config(frozen_ctx, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('env_files = ["missing.env"]\n' + EXAMPLE.read_text())
    refused = err(call(frozen_ctx, "mf_plan_run", config_path=str(config), team="personal"), "invalid_config")
    assert "missing.env" in refused.message and "env_files" in [f.path for f in refused.fields]


@pytest.mark.parametrize("tool", ["mf_validate_config", "mf_plan_run", "mf_prepare_config"])
def test_a_200_mb_config_is_named_too_large_not_missing(frozen_ctx, tmp_path, tool):
    big = tmp_path / "big.toml"
    with big.open("wb") as handle:  # sparse: no disk used
        handle.truncate(200 * 1000 * 1000)
    arguments = {"mf_validate_config": {"config_path": str(big)},
                 "mf_plan_run": {"config_path": str(big), "team": "personal"},
                 "mf_prepare_config": {"example": str(big), "dest": str(tmp_path / "copy.toml")}}[tool]
    refused = err(call(frozen_ctx, tool, **arguments), "bad_arguments")
    assert "200.0 MB" in refused.message and "not found" not in refused.message
    assert [f.path for f in refused.fields] == [next(iter(arguments))] and not (tmp_path / "copy.toml").exists()
