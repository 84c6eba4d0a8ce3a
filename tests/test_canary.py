"""The canary test: distinct fake secrets everywhere, every tool and every CLI command run, no canary out.

Canary values (obviously fake) are placed in

* the process environment: ``PRIME_API_KEY`` (the emulator accepts it as the user's key),
  ``WANDB_API_KEY``, ``HF_TOKEN``, ``OPENAI_API_KEY`` and ``MF_CANARY_LOG_SECRET`` (other
  secret-named variables);
* env files: the TOML's ``env_files`` (``WANDB_API_KEY``) and the ``env_files`` argument
  (``HF_TOKEN``); both override the environment, so *their* values reach the run;
* TOML files: a literal under a secret-named key and a copy of an environment secret (both
  must be refused by location, never echoed);
* emulator log lines and run texts: the ``echo_wandb_key`` scenario logs the forwarded W&B key
  (the env file's), and a ``fail`` scenario puts every other canary into the error message,
  the failure analysis and ERROR log lines, long enough to be clipped, with digits that log
  summaries mask.

Then every registry tool runs through :func:`skill.registry.call_tool` (results and error
paths) and every CLI command runs as ``python -m skill ...`` in a fresh process, with
``--json`` and without. No canary - and no 8-character piece of one's random part, so clipped
or masked copies count too - may appear in any result, ToolError, stdout/stderr, file written
under the test's folders (the state store and its audit trail, plots, traces, prepared configs; the input files the test
wrote are the only exceptions), or ``tests/cassettes``.

The test can fail: with the scrubber disabled (``Scrubber.scrub_text`` returning its input
unchanged) the first check already reports the W&B canary in the ``mf_get_logs`` result.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from _helpers import EXAMPLE, cli_env, emulator_env, mf
from conftest import Recorder

from skill import registry
from skill.emulator import DEMO_SPEED, TEAM_RESEARCH_ID, EmulatorServer, default_seed
from tools.core import Context
from tools.errors import ToolError
from tools.launch import approve_plan

ROOT = Path(__file__).resolve().parents[1]

# Each canary: a kind prefix, then 12 letters outside a-f (so no hex/number mask touches them)
# and digits (which log summaries mask, so an unscrubbed masked copy still shows the letters).
PRIME = "canary-prime-key-QzXkWvBmRtYp4417"
ENV_WANDB = "canary-env-wandb-HsLqNzJwKxPu2290"
ENV_HF = "canary-env-hf-TgVrWsMzQyLo8123"
ENV_OTHER = "canary-env-openai-PjRzKwXnUvSt5561"
LOG = "canary-log-MvNwQxZsRkLj7734"
ENVFILE_WANDB = "canary-envfile-wandb-ZrSwTqVmXpNk3308"
ENVFILE_HF = "canary-envfile-hf-WxYzRsPqMnLk6645"
TOML = "canary-toml-KsLmNpQrStUv9902"
CANARIES = {
    "PRIME_API_KEY (env)": PRIME, "WANDB_API_KEY (env)": ENV_WANDB, "HF_TOKEN (env)": ENV_HF,
    "OPENAI_API_KEY (env)": ENV_OTHER, "MF_CANARY_LOG_SECRET (env, logs)": LOG,
    "WANDB_API_KEY (TOML env file)": ENVFILE_WANDB, "HF_TOKEN (env_files argument)": ENVFILE_HF,
    "TOML literal": TOML,
}


def pieces(canary: str) -> list[str]:
    """Every 8-letter window of the canary's random letters (a clipped or masked copy shows one)."""
    letters = canary.rsplit("-", 1)[1][:12]
    return [letters[i:i + 8] for i in range(len(letters) - 7)]


PIECES = {piece: label for label, value in CANARIES.items() for piece in pieces(value)}


def leaks(text: str) -> list[str]:
    """Labels of the canaries that ``text`` shows (whole or in part)."""
    return sorted({label for piece, label in PIECES.items() if piece in text})


class Seen:
    """Collects every output with where it came from, and reports the leaking ones."""

    def __init__(self) -> None:
        self.outputs: list[tuple[str, str]] = []
        self.unexpected: list[str] = []

    def add(self, where: str, text: str) -> None:
        self.outputs.append((where, text))

    def check(self) -> None:
        found = [f"{where}: {', '.join(labels)}" for where, text in self.outputs if (labels := leaks(text))]
        assert not found and not self.unexpected, "\n".join(
            ["canaries leaked:", *found, "unexpected outcomes:", *self.unexpected])


@pytest.fixture
def emu() -> Iterator[EmulatorServer]:
    seed = default_seed()
    seed.users[0].keys.append(PRIME)  # the canary is a working PRIME_API_KEY for the default user
    with EmulatorServer(speed=DEMO_SPEED, seed=seed) as server:
        Recorder.install(server)
        yield server


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def long_text(*values: str) -> str:
    """A long server text with each value at several offsets, so clipping cuts some of them."""
    parts = []
    for i in range(12):
        for value in values:
            parts.append("x" * (7 * i % 23) + f" token {value} at line {i}")
    return "trainer crashed:" + " ".join(parts)


# Many commands in one test (each its own process or fault): a bound for a hang that fits that much work on a
# machine loaded ten times over (the default 300 s is per test, sized for one command's work).
@pytest.mark.timeout(1200)
def test_no_canary_leaves_through_any_tool_or_command(emu, tmp_path):
    home, project, state = tmp_path / "home", tmp_path / "project", tmp_path / "state"
    home.mkdir()
    env = {
        "PRIME_API_KEY": PRIME, "PRIME_API_BASE_URL": emu.base_url, "PRIME_TRACES_URL": emu.base_url,
        "WANDB_API_KEY": ENV_WANDB, "HF_TOKEN": ENV_HF, "OPENAI_API_KEY": ENV_OTHER, "MF_CANARY_LOG_SECRET": LOG,
    }
    proc_env = cli_env(emu, home, state, **env, COLUMNS="200", TERM="dumb")
    # Input files the user wrote: the only files allowed to hold canaries.
    toml_env = write(project / "secrets.env", f'# W&B for the run\nWANDB_API_KEY="{ENVFILE_WANDB}"\n')
    arg_env = write(project / "extra.env", f"HF_TOKEN='{ENVFILE_HF}'\n")
    task = write(project / "task.toml", 'env_files = ["secrets.env"]\n' + EXAMPLE.read_text())
    leaky = write(project / "leaky.toml", EXAMPLE.read_text().replace(
        "[monitors.wandb]\n", f'[monitors.wandb]\napi_key = "{TOML}"\nentity = "{ENV_OTHER}"\n'))
    inputs = {toml_env, arg_env, task, leaky}

    seen = Seen()
    called: set[str] = set()
    ctx = Context(env=env, home=home, state_dir=state, cwd=project, approver=lambda request: True)

    def call(name: str, arguments: Any, expect_error: str | None = None) -> Any:
        result = registry.call_tool(name, arguments, ctx)
        called.add(name)
        seen.add(f"{name} {arguments!r:.80}", result.model_dump_json())
        got = result.code if isinstance(result, ToolError) else None
        if got != expect_error:
            seen.unexpected.append(f"{name} {arguments!r:.100}: expected {expect_error or 'a result'}, got "
                                   f"{got or 'a result'}: {getattr(result, 'message', '')[:200]}")
        return result

    # -- set-up and launch through the tools ----------------------------------------------------
    call("mf_preflight", {})
    call("mf_list_examples", {})
    call("mf_prepare_config", {"example": "basic/reverse-text/rl", "dest": "prepared.toml", "name": "canary-run"})
    call("mf_validate_config", {"config_path": "task.toml"})
    call("mf_list_models", {"team": "personal"})
    call("mf_list_gpus", {"team": "personal"})
    call("mf_list_volumes", {"team": TEAM_RESEARCH_ID})
    call("mf_list_teams", {})
    emu.state.set_scenario("echo_wandb_key")
    emu.state.set_scenario("fail", at_step=4, error_message=long_text(LOG, PRIME, ENV_HF),
                           root_cause=long_text(ENVFILE_HF, ENV_WANDB, ENV_OTHER),
                           evidence=[f"step {i}: secret {v} rejected" for i, v in
                                     enumerate([LOG, PRIME, ENV_HF, ENVFILE_HF, ENV_WANDB, ENV_OTHER, ENVFILE_WANDB])])
    plan = call("mf_plan_run", {"config_path": "task.toml", "team": "personal",
                                "secrets": ["WANDB_API_KEY", "HF_TOKEN"], "env_files": ["extra.env"]})
    assert plan.secret_names == ["HF_TOKEN", "WANDB_API_KEY"]
    run_a = call("mf_dispatch_run", {"plan_id": plan.plan_id}).run_id
    assert emu.state.run(run_a).wandb_api_key == ENVFILE_WANDB  # the env files win over the environment
    emu.state.set_speed(0)
    emu.state.advance(600)
    assert emu.state.run(run_a).status == "FAILED"
    log_text = json.dumps([line for line in emu.state.run(run_a).logs], default=str)
    assert ENVFILE_WANDB in log_text and LOG in log_text  # the platform side really holds the canaries
    call("mf_list_launches", {})

    # -- every read tool on the run ---------------------------------------------------------------
    call("mf_get_run", {"run_id": run_a})
    call("mf_list_runs", {"team": "personal"})
    call("mf_check_progress", {"run_id": run_a})
    for component in ("trainer", "orchestrator", "inference"):
        call("mf_get_logs", {"run_id": run_a, "component": component, "tail_lines": 500})
    echoed = call("mf_get_logs", {"run_id": run_a, "component": "trainer", "search": "wandb"})
    assert "[REDACTED:WANDB_API_KEY]" in echoed.model_dump_json()  # the echo came through, scrubbed
    summary = call("mf_summarize_logs", {"run_id": run_a})
    assert "[REDACTED:MF_CANARY_LOG_SECRET]" in summary.model_dump_json()
    exported = call("mf_export_logs", {"run_id": run_a, "dest": "logs-a"})
    assert "[REDACTED:WANDB_API_KEY]" in (project / "logs-a" / "trainer.log").read_text()  # files are scrubbed too
    assert exported.lines_written > 0
    call("mf_get_spend", {"run_id": run_a})
    call("mf_get_metrics", {"run_id": run_a})
    call("mf_plot_metrics", {"run_id": run_a, "dest": "plots/a.png"})
    call("mf_list_checkpoints", {"run_id": run_a})
    call("mf_download_checkpoint", {"run_id": run_a, "dest": "ckpt-a"}, "no_volume")  # the example names none
    call("mf_wait_for_run", {"run_id": run_a, "timeout_seconds": 1})
    call("mf_list_traces", {"run_id": run_a})
    call("mf_download_traces", {"run_id": run_a, "dest": "traces-a"})
    report = call("mf_run_report", {"run_id": run_a, "traces_dir": "traces-a"})
    assert "secrets forwarded by name: HF_TOKEN, WANDB_API_KEY" in report.markdown  # names, never values
    plan_c = call("mf_plan_run", {"config_path": "task.toml", "team": "personal"})
    run_c = call("mf_dispatch_run", {"plan_id": plan_c.plan_id}).run_id
    assert call("mf_stop_run", {"run_id": run_c, "timeout_seconds": 5}).status == "STOPPED"
    plan_d = call("mf_plan_run", {"config_path": "task.toml", "team": "personal"})
    run_d = call("mf_dispatch_run", {"plan_id": plan_d.plan_id}).run_id
    emu.state.advance(400)
    assert call("mf_restart_run", {"run_id": run_d, "timeout_seconds": 5}).outcome == "restarted"
    call("mf_pause_run", {"run_id": run_d, "timeout_seconds": 0})
    emu.state.advance(60)
    resumed = call("mf_resume_run", {"run_id": run_d, "secrets": ["WANDB_API_KEY", "HF_TOKEN"],
                                     "env_files": ["secrets.env", "extra.env"]})
    assert resumed.status == "created" and emu.state.run(resumed.run_id).wandb_api_key == ENVFILE_WANDB
    call("mf_compare_runs", {"run_ids": [run_a, run_c, resumed.run_id], "plot_path": "plots/compare.png"})

    # -- error paths ------------------------------------------------------------------------------
    refused = call("mf_plan_run", {"config_path": "leaky.toml", "team": "personal"}, "secret_in_input")
    assert [f.path for f in refused.fields] == ["leaky.toml.monitors.wandb.api_key", "leaky.toml.monitors.wandb.entity"]
    call("mf_validate_config", {"config_path": "leaky.toml"})
    call("mf_plan_run", {"config_path": "task.toml", "team": "personal", "secrets": [ENV_OTHER]}, "secret_in_input")
    call("mf_plan_run", {"config_path": "task.toml", "team": "personal", "secrets": [f"HF_TOKEN={ENV_HF}"]},
         "secret_in_input")
    call("mf_plan_run", {"config_path": "task.toml", "team": "personal", "secrets": ["OPENAI_API_KEY"]},
         "unsupported_secret")
    call("mf_plan_run", {"config_path": "task.toml", "team": "personal", "name": LOG}, "secret_in_input")
    call("mf_dispatch_run", {"plan_id": plan.plan_id, "confirmation": PRIME}, "secret_in_input")
    call("mf_get_run", {"run_id": ENV_OTHER}, "secret_in_input")
    call("mf_stop_run", {"run_id": run_a, "confirmation": ENV_HF}, "secret_in_input")
    call("mf_get_logs", {"run_id": run_a, "component": ENV_HF}, "bad_arguments")
    call("mf_get_logs", {"run_id": run_a, "search": ENVFILE_WANDB}, "secret_in_input")
    call("mf_prepare_config", {"example": "leaky.toml", "dest": "copied.toml"}, "secret_in_input")
    call("mf_prepare_config", {"example": "basic/reverse-text/rl", "dest": "named.toml", "name": ENV_WANDB},
         "secret_in_input")
    call("mf_list_runs", {"team": PRIME}, "secret_in_input")
    call("mf_list_runs", f'{{"status": "{LOG}", "page": "x"}}', "bad_arguments")
    unknown = registry.call_tool("mf_nope", {"run_id": PRIME}, ctx)
    seen.add("unknown tool", unknown.model_dump_json())

    # -- the CLI, one fresh process per command ------------------------------------------------------
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = mf(*args, env=proc_env, cwd=project)
        seen.add(f"cli {' '.join(args)[:80]} (exit {done.returncode})", done.stdout + done.stderr)
        return done

    cli_plan = json.loads(cli("plan-run", "task.toml", "--team", "personal", "--secrets", "WANDB_API_KEY",
                              "--env-files", "extra.env", "--json").stdout)
    assert cli("approve", cli_plan["plan_id"]).returncode == 4  # no terminal: refused
    assert cli("approve", cli_plan["plan_id"], "--json").returncode == 4
    assert cli("dispatch-run", cli_plan["plan_id"], "--json").returncode == 4  # no confirmation
    token = approve_plan(cli_plan["plan_id"], "terminal", ctx)
    run_b = json.loads(cli("dispatch-run", cli_plan["plan_id"], "--confirmation", token, "--json").stdout)["run_id"]
    required = json.loads(cli("stop-run", run_b, "--json").stdout)
    stop_plan = required["fix"].split("model-factory approve ")[1].split("`")[0]
    cli("stop-run", run_b)
    stop_token = approve_plan(stop_plan, "terminal", ctx)
    assert json.loads(cli("stop-run", run_b, "--confirmation", stop_token, "--json",
                          "--timeout-seconds", "5").stdout)["status"] == "STOPPED"

    # (command, exit code expected with and without --json): 0 result, 2 usage error, 3 tool error.
    commands: list[tuple[list[str], int]] = [
        (["preflight"], 0), (["list-examples"], 0), (["validate-config", "task.toml"], 0),
        (["validate-config", "leaky.toml"], 1), (["list-models", "--team", "personal"], 0),
        (["list-gpus", "--team", "personal"], 0), (["list-volumes", "--team", TEAM_RESEARCH_ID], 0),
        (["list-teams"], 0), (["plan-run", "leaky.toml", "--team", "personal"], 3),
        (["plan-run", "task.toml", "--team", "personal", "--secrets", ENV_HF], 3), (["list-launches"], 0),
        (["get-run", run_a], 0), (["get-run", ENV_OTHER], 3), (["list-runs", "--team", "personal"], 0),
        (["check-progress", run_a], 0), (["get-logs", run_a, "--component", "trainer"], 0),
        (["get-logs", run_a, "--component", ENV_HF], 2), (["summarize-logs", run_a], 0), (["get-metrics", run_a], 0),
        (["list-checkpoints", run_a], 0), (["get-spend", run_a], 0),
        (["wait-for-run", run_a, "--timeout-seconds", "1"], 0),
        (["list-traces", run_a], 0), (["dispatch-run", plan.plan_id], 0), (["stop-run", run_a], 0),
        (["pause-run", run_a], 0), (["restart-run", run_a], 0), (["resume-run", run_a], 3),
        (["run-report", run_a, "--no-plot"], 0), (["compare-runs", run_a, run_c], 0), (["history"], 0),
        (["history", "--run", run_a], 0),
        (["tools", "export", "--format", "mcp"], 0), (["tools", "export", "--format", "openai"], 0),
        (["tools", "export", "--format", "anthropic"], 0),
    ]
    jobs = [([*c, *j], code) for c, code in commands for j in ([], ["--json"]) if c[0] != "tools" or not j]
    for i, j in enumerate(([], ["--json"])):
        jobs += [(["prepare-config", "basic/reverse-text/rl", f"prep{i}.toml", *j], 0),
                 (["plot-metrics", run_a, "--dest", f"plots/cli{i}.png", *j], 0),
                 (["download-traces", run_a, f"traces-cli{i}", *j], 0),
                 (["download-checkpoint", run_a, f"ckpt-cli{i}", *j], 3),
                 (["export-logs", run_a, f"logs-cli{i}", *j], 0)]
    with ThreadPoolExecutor(3) as pool:
        exits = list(pool.map(lambda job: cli(*job[0]).returncode, jobs))
    assert [(args, code) for (args, code), got in zip(jobs, exits, strict=True) if got != code] == []
    ran = {args[0] for args, _ in jobs} | {"dispatch-run", "stop-run", "approve"}
    assert {spec.command for spec in registry.TOOLS} <= ran
    assert called == {spec.name for spec in registry.TOOLS}

    # -- what was written, and what the platform received -----------------------------------------
    for path in sorted(tmp_path.rglob("*")):
        if path.is_file() and path not in inputs:
            seen.add(f"file {path.relative_to(tmp_path)}", path.read_bytes().decode("latin-1"))
    for path in sorted((ROOT / "tests" / "cassettes").rglob("*")):
        if path.is_file():
            seen.add(f"cassette {path.name}", path.read_bytes().decode("latin-1"))
    assert any(p.suffix == ".png" for p in tmp_path.rglob("*.png")) and (project / "traces-a").is_dir()
    ctx.close()
    seen.check()

    # The platform got the env files' W&B/HF values in the create bodies' wandbApiKey/hfToken and
    # nowhere else; the launch key, other secrets and the shadowed environment values never.
    creates = 0
    for request in emu.recorder.requests:
        method, path, query, sent = request.method, request.path, request.query, request.json()
        if method == "POST" and (path == "/api/v1/training/runs" or path.endswith("/resume")):
            creates += 1
            assert sent.get("wandbApiKey") == ENVFILE_WANDB and sent.get("hfToken") in (ENVFILE_HF, None), sent
            sent = {k: v for k, v in sent.items() if k not in ("wandbApiKey", "hfToken")}
        text = f"{path}?{query} {json.dumps(sent)}"
        assert not leaks(text), f"{method} {path} sent {leaks(text)}"
    assert creates == 5 and len(emu.state.runs) == 5  # four launches and one resume


def test_every_tool_refuses_a_pasted_key_in_any_text_argument_before_sending(emu, tmp_path):
    """A known key format (here a fake Hugging Face token) in any text argument of any tool is
    refused by location, never echoed, and nothing reaches the platform."""
    pasted = "hf_FAKEcanaryPastedTokenAbCdEfGhIjKlMnOp"
    ctx = Context(env={"PRIME_API_KEY": PRIME, "PRIME_API_BASE_URL": emu.base_url, "PRIME_TRACES_URL": emu.base_url},
                  home=tmp_path, state_dir=tmp_path / "state", cwd=tmp_path)
    checked = []
    for spec in registry.TOOLS:
        schema = registry.input_schema(spec.name)["properties"]
        text = [name for name, prop in schema.items()
                if "string" in json.dumps(prop) and "enum" not in json.dumps(prop) and "array" not in json.dumps(prop)]
        if not text:
            continue
        required = {name: ["r1", "r2"] if "array" in json.dumps(schema[name]) else "dest.toml"
                    for name, field in spec.input_model.model_fields.items() if field.is_required()}
        result = registry.call_tool(spec.name, {**required, text[0]: pasted}, ctx)
        assert isinstance(result, ToolError) and result.code == "secret_in_input", (spec.name, result)
        assert [f.path for f in result.fields] == [f"arguments.{text[0]}"]
        assert pasted not in result.model_dump_json() and "AbCdEfGh" not in result.model_dump_json()
        checked.append(spec.name)
    assert len(checked) == len(registry.TOOLS) - 3 and emu.recorder.requests == []
    assert not (tmp_path / "dest.toml").exists()
    ctx.close()


def test_cassettes_never_hold_the_launch_key_or_a_real_key_format():
    """The contract cassettes (tests/cassettes/capture_cli.py) record the real CLI with fake values and
    leave the Authorization header out: its PRIME_API_KEY appears in no cassette."""
    from tools.guardrails.secret_detection import assigned_secrets, scan_for_secrets

    capture = (ROOT / "tests" / "cassettes" / "capture_cli.py").read_text()
    assert 'API_KEY = "fake-prime-api-key"' in capture
    cassettes = sorted((ROOT / "tests" / "cassettes").glob("*.yaml"))
    assert len(cassettes) > 20
    for path in cassettes:
        text = path.read_text()
        assert "fake-prime-api-key" not in text, path.name
        for line in text.splitlines():  # the recorded command line assigns the fake HF_TOKEN value, on purpose
            fake = [line[a:b] for _, a, b in assigned_secrets(line)]
            hits = [h for h in scan_for_secrets(line, root=path.name)
                    if not (fake and all(v.startswith("fake-") for v in fake)
                            and h.kind == "a value assigned to a secret-named variable")]
            assert hits == [], (path.name, line[:60])


def test_a_key_forwarded_from_another_shell_is_redacted_by_its_shape(emu, tmp_path):
    """A real-looking W&B key (40 hex) is forwarded by the dispatching process and echoed by the
    trainer's log. A later session whose environment does not hold it (another shell, another
    machine) still gets it redacted: by its shape, right after "api key", not by its value."""
    wandb_key = "0123456789abcdef" * 2 + "fa4e0c1d"  # fake, in the shape of a W&B key (40 hex)
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    launcher = Context(env=emulator_env(emu, WANDB_API_KEY=wandb_key), home=home, cwd=project, state_dir=tmp_path / "s")
    emu.state.set_scenario("echo_wandb_key")
    plan = registry.call_tool("mf_plan_run", {"config_path": str(EXAMPLE), "team": "personal",
                                              "secrets": ["WANDB_API_KEY"]}, launcher)
    assert not isinstance(plan, ToolError), plan
    run = registry.call_tool("mf_dispatch_run", {"plan_id": plan.plan_id,
                                                 "confirmation": approve_plan(plan.plan_id, "terminal", launcher)},
                             launcher)
    assert not isinstance(run, ToolError), run
    emu.state.advance(600)
    assert any(wandb_key in line.text for line in emu.state.run(run.run_id).logs)  # the platform side does leak it
    # knows no W&B key
    reader = Context(env=emulator_env(emu), home=home, cwd=project, state_dir=tmp_path / "other-state")
    logs = registry.call_tool("mf_get_logs", {"run_id": run.run_id, "component": "trainer", "search": "wandb"}, reader)
    text = logs.model_dump_json()
    assert "logging in with api key [REDACTED:40-hex key]" in text and wandb_key not in text
    summary = registry.call_tool("mf_summarize_logs", {"run_id": run.run_id}, reader)
    assert wandb_key not in summary.model_dump_json()
