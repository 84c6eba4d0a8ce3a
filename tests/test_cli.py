"""The `model-factory` command as a user runs it: a subprocess, real HTTP against the emulator.

Bad input must give a typed error with a fix, a non-zero exit code and no traceback; exit
codes are the documented ones (skill/cli.py, README).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import (
    CLI,
    EXAMPLE,
    approved_launch,
    at_step,
    cli,
    cli_json,
    emulator_banner,
    free_port,
    mf,
    past_step,
    pasted,
    planned,
)

from skill import registry
from skill.cli import COMMANDS, command_parser, main
from skill.exit_codes import (
    EXIT_AMBIGUOUS,
    EXIT_CHECK_FAILED,
    EXIT_CONFIRMATION,
    EXIT_PIPE_CLOSED,
    EXIT_TOOL_ERROR,
    EXIT_USAGE,
)
from tools.core import program
from tools.errors import ToolError


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr


@pytest.fixture
def env(emulator, mf_env):
    return {**mf_env, "PATH": os.environ["PATH"]}


def tool_error(proc: subprocess.CompletedProcess, code: str) -> dict:
    no_traceback(proc)
    error = json.loads(proc.stdout)
    assert error["error"] is True and error["code"] == code, error
    assert error["fix"], error
    return error


def test_a_path_folder_that_cannot_be_looked_into_is_skipped_not_a_traceback(env):
    # what an unreadable folder on PATH does to a person running as another user (sudo -u with root's PATH);
    # as root, a folder name longer than the system allows fails the same way
    odd = "/" + "x" * 300 + "/bin"
    proc = cli("list-runs", env={**env, "PATH": os.pathsep.join([odd, env["PATH"]])})
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr


def test_missing_config_file(env, tmp_path):
    proc = cli("validate-config", str(tmp_path / "nope.toml"), "--json", env=env)
    assert proc.returncode == EXIT_TOOL_ERROR
    tool_error(proc, "config_not_found")


def test_invalid_toml(env, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[trainer\nmax_steps = 3\n")
    proc = cli("validate-config", str(bad), "--json", env=env)
    assert proc.returncode == EXIT_TOOL_ERROR
    error = tool_error(proc, "invalid_toml")
    assert error["fields"] and ":1:" in error["fields"][0]["path"]


def test_unknown_run_id(env):
    proc = cli("get-run", "cnosuchrun0000000000000000", "--json", env=env)
    assert proc.returncode == EXIT_TOOL_ERROR
    assert "mf_list_runs" in tool_error(proc, "not_found")["fix"]


def test_wrong_api_key(env):
    proc = cli("list-runs", "--json", env={**env, "PRIME_API_KEY": "mf-emulator-key-wrong"})
    assert proc.returncode == EXIT_TOOL_ERROR
    tool_error(proc, "unauthorized")
    assert "mf-emulator-key-wrong" not in proc.stdout + proc.stderr


def test_emulator_not_running(env):
    down = {**env, "PRIME_API_BASE_URL": "http://127.0.0.1:9", "PRIME_TRACES_URL": "http://127.0.0.1:9"}
    proc = cli("get-run", "crun", "--json", env=down)
    assert proc.returncode == EXIT_TOOL_ERROR
    error = tool_error(proc, "unavailable")
    assert "model-factory emulator" in error["fix"]


def test_human_output_of_an_error_goes_to_stderr_with_the_fix(env, tmp_path):
    proc = cli("validate-config", str(tmp_path / "nope.toml"), env=env)
    no_traceback(proc)
    assert proc.returncode == EXIT_TOOL_ERROR and proc.stdout == ""
    assert "[config_not_found]" in proc.stderr and "Fix:" in proc.stderr


def test_usage_error_exits_2(env):
    proc = cli("get-logs", "crun", "--tail-lines", "many", env=env)
    no_traceback(proc)
    assert proc.returncode == EXIT_USAGE
    proc = cli("get-run", env=env)
    assert proc.returncode == EXIT_USAGE


def test_out_of_range_values_are_usage_errors_listing_the_field(env):
    proc = cli("get-logs", "crun", "--tail-lines", "0", "--json", env=env)
    assert proc.returncode == EXIT_USAGE
    error = tool_error(proc, "bad_arguments")
    assert [f["path"] for f in error["fields"]] == ["tail_lines"]


def test_failed_checks_exit_1_so_shell_chains_stop(env, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[trainer]\n[orchestrator]\nclean = true\n[k8s]\n")
    proc = cli("validate-config", str(bad), "--json", env=env)
    no_traceback(proc)
    assert proc.returncode == EXIT_CHECK_FAILED and json.loads(proc.stdout)["valid"] is False
    assert cli("validate-config", str(EXAMPLE), "--json", env=env).returncode == 0
    not_ready = cli("preflight", "--json", env={**env, "PRIME_API_KEY": "mf-emulator-key-wrong"})
    assert not_ready.returncode == EXIT_CHECK_FAILED and json.loads(not_ready.stdout)["ok"] is False
    assert cli("preflight", "--json", env=env).returncode == 0


def test_version(env):
    proc = cli("--version", env=env)
    assert proc.returncode == 0 and proc.stdout.startswith("model-factory-skill ")


def interrupted_in(emulator, fault, command: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run ``command``, press Ctrl-C (SIGINT) once the emulator holds its request on ``fault``: its exit code and
    stderr."""
    import signal

    proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not emulator.faults.wait_fired(fault.id, timeout=120):
        proc.kill()
        pytest.fail(f"{command} never sent the request the fault holds: {proc.communicate()}")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def test_ctrl_c_during_a_dispatch_says_how_to_reconcile(env, emulator, tmp_path):
    """SIGINT while the create is in flight: exit 130 and the way back (the same dispatch reconciles)."""

    policy_dir = tmp_path / "human"
    policy_dir.mkdir(mode=0o700)
    (policy_dir / "policy.toml").write_text("max_usd_per_run = 100.0\n")
    (policy_dir / "policy.toml").chmod(0o600)
    env = {**env, "MODEL_FACTORY_POLICY": str(policy_dir / "policy.toml")}
    project = tmp_path / "project"  # the policy must live outside the folder the agent writes to
    project.mkdir()
    plan = json.loads(mf("plan-run", str(EXAMPLE), "--team", "personal", "--json", env=env, cwd=project).stdout)
    delay = emulator.faults.delay(30, "POST", "/training/runs")
    code, err = interrupted_in(emulator, delay, [sys.executable, "-m", "skill", "dispatch-run", plan["plan_id"]],
                               env, project)
    assert code == 130 and "Traceback" not in err
    assert f"model-factory dispatch-run {plan['plan_id']}" in err and "do not plan again" in err


@pytest.mark.parametrize("as_json", [[], ["--json"]])
def test_ctrl_c_while_waiting_for_a_run_says_the_run_goes_on_and_how_to_wait_again(env, emulator, tmp_path, as_json):
    """SIGINT while wait-for-run waits for the platform: exit 130, the run is still RUNNING there, and the
    hint gives the commands to wait again and to see where the run is, each working when pasted."""
    from tools.core import Context

    ctx = Context(env=env, home=Path(env["HOME"]), state_dir=Path(env["MODEL_FACTORY_STATE_DIR"]))
    _, run = approved_launch(ctx, EXAMPLE)
    ctx.close()
    emulator.state.advance(past_step(2))
    delay = emulator.faults.delay(30, "GET", "/rft/runs/*")
    code, err = interrupted_in(emulator, delay, [str(CLI), "wait-for-run", run.run_id, *as_json], env, tmp_path)
    assert code == 130 and "Traceback" not in err, err
    assert f"Run {run.run_id} keeps going on the platform" in err, err
    emulator.faults.clear()
    commands = re.findall(r"`([^`]+)`", err)
    assert [shlex.split(c)[1:] for c in commands] == [["wait-for-run", run.run_id, *as_json],
                                                       ["check-progress", run.run_id]], err
    check = pasted(commands[1], env, cwd=tmp_path)
    assert check.returncode == 0 and "RUNNING" in check.stdout + check.stderr, check


@pytest.mark.parametrize("how", ["a busy port", "an address of another machine"])
def test_an_emulator_that_cannot_listen_says_why_wrapped_to_an_80_column_terminal(env, tmp_path, how):
    import socket

    from _helpers import in_terminal

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        host = "127.0.0.1" if how == "a busy port" else "192.0.2.1"  # TEST-NET-1: never an address of this machine
        code, text = in_terminal([sys.executable, "-m", "skill", "emulator", "--host", host, "--port", str(port)],
                                 {**env, "TERM": "xterm", "NO_COLOR": "1"}, tmp_path, timeout=60)
    lines = text.strip().splitlines()
    assert code == 1 and lines[0].startswith(f"Cannot listen on {host}:{port}:"), text
    assert all(len(line) <= 80 for line in lines) and len(lines) > 1, text
    fix = "Pick another --port (or stop the process using it)." if how == "a busy port" else \
        f"{host} is not an address of this machine: pick another --host (127.0.0.1, the default, is the loopback)."
    assert " ".join(lines).endswith(fix), text


def test_an_interrupt_inside_code_run_from_a_string_still_exits_130(env, tmp_path):
    """Dataclasses make their methods with exec while a module is imported (a command imports its tool's module
    on first use): a Ctrl-C landing there is caught like any other, and ``python -m skill`` still exits 130."""
    (tmp_path / "interrupted_in_exec.py").write_text(
        "import tools.core  # imported already, as in a command that has run a while\n"
        "from skill import cli\n"
        "cli._run = lambda argv: exec('raise KeyboardInterrupt')  # where the signal lands\n"
        "cli.main(['list-runs'])\n")
    proc = subprocess.run([sys.executable, "-m", "interrupted_in_exec"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 130 and proc.stderr.strip() == "Interrupted.", proc


def test_help_of_a_tool_command(env):
    proc = cli("plan-run", "--help", env=env)
    no_traceback(proc)
    assert proc.returncode == 0 and "--run-kind" in proc.stdout and "--secrets" in proc.stdout


def test_dispatch_without_confirmation_exits_with_the_confirmation_code(env, tmp_path):
    plan = cli("plan-run", str(EXAMPLE), "--team", "personal", "--json", env=env, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    plan_id = json.loads(plan.stdout)["plan_id"]
    proc = cli("dispatch-run", plan_id, "--json", env=env, cwd=tmp_path)
    assert proc.returncode == EXIT_CONFIRMATION
    assert f"model-factory approve {plan_id}" in tool_error(proc, "confirmation_required")["fix"]


def test_ambiguous_outcome_exit_code(env, emulator, tmp_path):
    """A create that commits and then never answers, while the run list is down too: exit 5
    (outcome unknown). Once the list answers again, the same dispatch reconciles (exit 0) and the
    emulator holds exactly one run."""
    project, human = tmp_path / "project", tmp_path / "human"
    project.mkdir()
    human.mkdir(mode=0o700)
    policy = human / "policy.toml"  # a human-written pre-authorization, outside the project folder
    policy.write_text("max_usd_per_run = 100.0\n")
    policy.chmod(0o600)
    env = {**env, "MODEL_FACTORY_POLICY": str(policy)}
    plan = json.loads(cli("plan-run", str(EXAMPLE), "--team", "personal", "--json", env=env, cwd=project).stdout)
    emulator.faults.commit_then_timeout()
    list_down = emulator.faults.status(503, "GET", "/rft/runs", times=None)
    proc = cli("dispatch-run", plan["plan_id"], "--json", env=env, cwd=project)
    assert proc.returncode == EXIT_AMBIGUOUS
    assert tool_error(proc, "ambiguous_launch")["ambiguous"] is True
    emulator.faults.remove(list_down.id)
    again = cli("dispatch-run", plan["plan_id"], "--json", env=env, cwd=project)
    assert again.returncode == 0, again.stdout
    assert json.loads(again.stdout)["status"] == "reconciled"
    assert len(emulator.state.runs) == 1


def test_tools_export_formats(env):
    for fmt, key in (("openai", "function"), ("anthropic", "input_schema"), ("mcp", "inputSchema")):
        proc = cli("tools", "export", "--format", fmt, env=env)
        assert proc.returncode == 0, proc.stderr
        specs = json.loads(proc.stdout)
        assert len(specs) >= 20 and all(key in spec for spec in specs)
    proc = cli("tools", "export", "--format", "yaml", env=env)
    assert proc.returncode == EXIT_USAGE and "openai" in proc.stderr


def test_demo_json(tmp_path):
    """The README's first command, as JSON, in a process of its own: a completed run and its traces on disk
    (``--speed 2000``: each second the demo waits moves its emulator 2,000 s, so the run ends within seconds)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")}
    proc = mf("demo", "--json", "--speed", "2000", "--dest", str(tmp_path / "traces"), env=env, cwd=tmp_path,
              timeout=300)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status"] == "COMPLETED" and summary["steps_completed"] == 20
    assert summary["traces_downloaded"] > 0 and summary["dest"] == str(tmp_path / "traces")
    manifest = [json.loads(line) for line in (tmp_path / "traces" / "manifest.jsonl").read_text().splitlines()]
    files = list((tmp_path / "traces" / "traces").glob("*.json"))
    assert len(files) == summary["traces_downloaded"] == sum(line["kind"] == "trace" for line in manifest)
    assert manifest[0]["run_id"] == summary["run_id"] and manifest[-1] == {**manifest[-1], "state": "finished"}


def test_a_base_url_that_is_not_the_api_is_named(env, tmp_path):
    """A web server that is not Model Factory (a plain HTTP file server answering 404 pages): the error
    points at PRIME_API_BASE_URL instead of claiming the run does not exist."""
    import http.server
    import threading

    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        other = f"http://127.0.0.1:{server.server_address[1]}"
        proc = cli("get-run", "crun", "--json", env={**env, "PRIME_API_BASE_URL": other, "PRIME_TRACES_URL": other})
    finally:
        server.shutdown()
    assert proc.returncode == EXIT_TOOL_ERROR
    error = tool_error(proc, "not_found")
    assert "did not answer like the Model Factory API" in error["message"] and "PRIME_API_BASE_URL" in error["fix"]


# -- one parser: usage errors and help ------------------------------------------------------

SECRET_LIKE = "correct-horse-battery-staple-pw"


@pytest.mark.parametrize("args", [
    ["get-logs", "crun", "--since-seconds", SECRET_LIKE],
    ["get-logs", "crun", "--component", SECRET_LIKE],
    ["get-run", "crun", SECRET_LIKE],
    ["get-run", "crun", f"--no-such-option={SECRET_LIKE}"],
    ["get-run", "crun", f"--json={SECRET_LIKE}"],
    ["emulator", "--port", SECRET_LIKE],
    ["tools", "export", "--format", SECRET_LIKE],
    [SECRET_LIKE],
])
def test_a_usage_error_names_the_argument_and_never_echoes_its_value(env, args):
    for extra in ([], ["--json"]):
        proc = cli(*args, *extra, env=env)
        no_traceback(proc)
        assert proc.returncode == EXIT_USAGE, (args, extra, proc.stdout, proc.stderr)
        assert SECRET_LIKE not in proc.stdout + proc.stderr, (args, extra)


FAKE_KEY = "hf_" + "FAKE" * 9


def test_plan_run_takes_a_bundled_example_id_as_validate_config_and_prepare_config_do(env, tmp_path):
    code, plan = cli_json("plan-run", "basic/reverse-text/rl", "--team", "personal", env=env)
    assert code == 0 and plan["config_path"] == str(EXAMPLE), plan
    for args in (("plan-run", "basic/no-such/rl", "--team", "personal"), ("validate-config", "basic/no-such/rl"),
                 ("prepare-config", "basic/no-such/rl", str(tmp_path / "x.toml"))):
        code, error = cli_json(*args, env=env)
        assert (code, error["code"]) == (EXIT_TOOL_ERROR, "config_not_found"), error
        assert "'basic/no-such/rl' is not a bundled example id" in error["message"], error
        assert error["next_calls"] == [{"tool": "mf_list_examples", "arguments": {}}]
    assert not (tmp_path / "x.toml").exists()


def test_an_unknown_option_names_itself_but_never_its_value_nor_a_key_pasted_as_an_option(env):
    proc = cli("list-runs", f"--lmit={SECRET_LIKE}", "--bogus", SECRET_LIKE, f"--{FAKE_KEY}", env=env)
    no_traceback(proc)
    assert proc.returncode == EXIT_USAGE and "unknown options --lmit, --bogus" in proc.stderr, proc.stderr
    assert "did you mean --limit?" in proc.stderr and "1 unknown option(s) (not shown)" in proc.stderr
    assert SECRET_LIKE not in proc.stderr and FAKE_KEY not in proc.stderr


def positional_words(command: str) -> list[tuple[str, str]]:
    """(field, METAVAR) of each positional argument of ``command``, in order (``METAVAR...`` for one that takes
    several words)."""
    parser = command_parser(command)
    return [(a.dest, a.metavar + ("..." if a.nargs == "+" else "")) for a in parser._actions
            if not a.option_strings and a.dest != "action"]


WITH_POSITIONALS = [c for c in [*COMMANDS, *(s.command for s in registry.TOOLS)] if positional_words(c)]


@pytest.mark.parametrize("command", WITH_POSITIONALS)
def test_a_positional_argument_given_as_an_option_says_it_is_positional_with_the_usage_line(command, capsys):
    words = positional_words(command)
    usage = " ".join([program(), command, *(metavar for _, metavar in words)])
    for field, metavar in words:
        for option in ("--" + field.replace("_", "-"), "--" + field.removesuffix("_id").removesuffix("_path")):
            with pytest.raises(SystemExit) as done:
                main([command, *(["x"] * (len(words) - 1)), option, "y"])
            said = capsys.readouterr().err
            assert done.value.code == EXIT_USAGE and "Traceback" not in said
            flat = " ".join(said.split())
            name = metavar.removesuffix("...")
            assert f"{option} is not an option: {name} is positional" in flat and f"`{usage}`" in flat, said
            with pytest.raises(SystemExit):
                main([command, f"{option}=y", "--json"])
            error = json.loads(capsys.readouterr().out)
            assert error["code"] == "bad_arguments" and [f["path"] for f in error["fields"]] == [field], error


def test_the_usage_line_of_a_positional_given_as_an_option_runs_when_pasted_with_its_values(env, emulator, launch,
                                                                                              tmp_path):
    run_id = launch()
    emulator.state.advance(3600)
    dest = tmp_path / "traces here"
    proc = cli("download-traces", run_id, "--dest", str(dest), env=env)
    no_traceback(proc)
    assert proc.returncode == EXIT_USAGE and not dest.exists()
    usage = re.search(r"`([^`]+ RUN_ID DEST)`", " ".join(proc.stderr.split()))
    assert usage and "--dest is not an option: DEST is positional" in " ".join(proc.stderr.split()), proc.stderr
    done = pasted(usage[1].replace("RUN_ID", run_id).replace("DEST", shlex.quote(str(dest))), env)
    assert done.returncode == 0, done.stderr
    assert (dest / "manifest.jsonl").is_file()


def test_a_bad_value_says_which_field_and_what_type_it_expects(env):
    error = tool_error(cli("get-logs", "crun", "--since-seconds", SECRET_LIKE, "--json", env=env), "bad_arguments")
    assert [f["path"] for f in error["fields"]] == ["since_seconds"]
    assert "expected an integer" in error["fields"][0]["problem"]
    human = cli("get-logs", "crun", "--since-seconds", SECRET_LIKE, env=env)
    assert human.returncode == EXIT_USAGE and "--since-seconds" in human.stderr and "integer" in human.stderr


@pytest.mark.parametrize(("args", "fields"), [
    (["get-run", "--json"], ["run_id"]),
    (["approve", "--json"], ["plan_id"]),
    (["demo", "--speed", "fast", "--json"], ["speed"]),
    (["list-runs", "--bogus", "--json"], [""]),
    (["no-such-command", "--json"], []),
])
def test_under_json_a_usage_error_is_a_tool_error_object_on_stdout(env, args, fields):
    proc = cli(*args, env=env)
    assert proc.returncode == EXIT_USAGE
    error = tool_error(proc, "bad_arguments")
    assert set(error) == set(ToolError.model_fields)
    assert [f["path"] for f in error["fields"]] == fields and "--help" in error["fix"]


def test_usage_errors_without_json_print_the_usage_line_on_stderr(env):
    proc = cli("get-run", env=env)
    assert proc.returncode == EXIT_USAGE and proc.stdout == ""
    assert proc.stderr.startswith("usage: model-factory get-run") and "required: RUN_ID" in proc.stderr
    bare = cli(env=env)
    assert bare.returncode == EXIT_USAGE and bare.stdout.startswith("usage: model-factory")
    unknown = cli("get-rnu", "x", env=env)
    assert unknown.returncode == EXIT_USAGE and "did you mean get-run" in unknown.stderr


def every_command() -> list[list[str]]:
    return [[], *([name] for name in COMMANDS), ["tools", "export"], *([spec.command] for spec in registry.TOOLS)]


@pytest.mark.parametrize("command", every_command(), ids=lambda c: " ".join(c) or "top")
def test_every_help_fits_80_columns_in_one_style(command, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    text = capsys.readouterr().out
    assert done.value.code == 0
    assert text.startswith("usage: model-factory") and "  -h, --help" in text and "Show this help and exit." in text
    assert max(map(len, text.splitlines())) <= 80, [line for line in text.splitlines() if len(line) > 80]


def test_the_top_level_help_lists_every_command(env):
    proc = cli("--help", env={**env, "COLUMNS": "80"})
    assert proc.returncode == 0
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line.startswith("  ") and line.split()}
    assert {*COMMANDS, *(spec.command for spec in registry.TOOLS)} <= listed


def test_the_json_path_loads_neither_rich_nor_typer_nor_click(env):
    """A tool call with --json starts fast: no human-output or option-framework module is imported."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "skill", "get-run", "crun", "--json"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_TOOL_ERROR and json.loads(proc.stdout)["code"] == "not_found"
    imported = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert {"pydantic", "httpx", "skill", "tools"} <= imported
    assert imported.isdisjoint({"rich", "typer", "click", "mcp"}), imported & {"rich", "typer", "click", "mcp"}


_LOCAL = """
import json, sys
from skill.registry import call_tool
from tools.core import Context
ctx = Context.from_environment()
answers = [call_tool("mf_list_examples", {}, ctx),
           call_tool("mf_validate_config", {"config_path": "basic/reverse-text/rl", "schema": "snapshot"}, ctx),
           call_tool("mf_prepare_config", {"example": "basic/reverse-text/rl", "dest": "task.toml"}, ctx)]
print(json.dumps({"errors": [a.model_dump() for a in answers if getattr(a, "error", False) is True],
                  "valid": answers[1].valid, "http": sorted(m for m in ("httpx", "httpcore", "tenacity",
                  "tools.platform.client", "tools.platform._http") if m in sys.modules)}))
"""


def test_a_local_tool_never_loads_the_http_stack(env, tmp_path):
    """Listing, validating and preparing a config need no platform: a fresh process running them (in
    Python, and each as a command) imports neither httpx nor the platform client."""
    proc = subprocess.run([sys.executable, "-c", _LOCAL], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer == {"errors": [], "valid": True, "http": []}, answer
    assert (tmp_path / "task.toml").is_file()
    for command in (["list-examples"], ["validate-config", "basic/reverse-text/rl", "--schema", "snapshot"],
                    ["prepare-config", "basic/reverse-text/rl", "again.toml"]):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "skill", *command, "--json"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                    if line.startswith("import time:") and "|" in line}
        assert "skill.registry" in imported, command  # the list is real: the tool registry is in it
        assert imported.isdisjoint({"httpx", "httpcore", "tenacity", "tools.platform.client"}), (command, imported)


@pytest.mark.parametrize("command", every_command()[1:], ids=lambda c: " ".join(c))
def test_every_command_answers_a_usage_error_under_json_with_a_tool_error(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([*command, "--no-such-option", "--json"])
    out = capsys.readouterr().out
    assert done.value.code == EXIT_USAGE
    error = json.loads(out)
    assert error["code"] == "bad_arguments" and "--help" in error["fix"]
    assert re.search(r"unknown options? --no-such-option\b", error["message"]), error["message"]


# -- a reader that stops early (`| head -1`) -----------------------------------------------------


def into_a_closed_pipe(*args: str, env: dict[str, str], cwd: Path | None = None,
                       stderr_too: bool = False) -> subprocess.CompletedProcess:
    """Run the command with stdout (and with ``stderr_too`` stderr as well, as ``2>&1 | head``
    does) on a pipe whose reader has already gone: the first write fails, every time."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "skill", *args], env=env, cwd=cwd, stdout=write,
                              stderr=write if stderr_too else subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [("preflight",), ("tools", "export", "--format", "openai"),
                                  ("list-examples",), ("list-runs", "--json")])
def test_a_reader_closing_the_pipe_early_ends_the_command_quietly_with_the_sigpipe_code(env, args):
    proc = into_a_closed_pipe(*args, env=env)
    assert proc.returncode == EXIT_PIPE_CLOSED, proc.stderr
    assert not any(w in proc.stderr for w in ("Traceback", "BrokenPipe", "Exception ignored")), proc.stderr


def test_a_launch_whose_output_pipe_closed_still_launched_once_and_does_not_exit_as_a_failed_check(
        env, emulator, tmp_path):
    from tools.core import Context
    from tools.launch import approve_plan

    ctx = Context(env=env, home=Path(env["HOME"]), state_dir=Path(env["MODEL_FACTORY_STATE_DIR"]))
    plan = planned(ctx, EXAMPLE, team="personal")
    code = approve_plan(plan.plan_id, "terminal", ctx)
    ctx.close()
    proc = into_a_closed_pipe("dispatch-run", plan.plan_id, "--confirmation", code, env=env, cwd=tmp_path,
                              stderr_too=True)
    assert proc.returncode == EXIT_PIPE_CLOSED
    assert len(emulator.state.runs) == 1


# -- a stalled platform: a read ends within the call's bound ---------------------------------------


def test_a_read_command_against_a_stalled_api_ends_within_the_call_bound_and_says_so(env, emulator, tmp_path):
    """The platform sends the headers of every run answer, then holds the body for 300 s: get-run
    gives up within MODEL_FACTORY_CALL_SECONDS (here 3 s; 50 by default, under a host's 60 s)
    with `unavailable` naming the bound, instead of three 30 s read timeouts one after another."""
    ctx_env = {**env, "PRIME_API_BASE_URL": emulator.base_url}
    from tools.core import Context

    ctx = Context(env=ctx_env, home=Path(env["HOME"]), state_dir=Path(env["MODEL_FACTORY_STATE_DIR"]))
    _, run = approved_launch(ctx, EXAMPLE)
    ctx.close()
    emulator.faults.stall(300, "GET", "/rft/runs/*", times=None)
    proc = mf("get-run", run.run_id, "--json", env={**env, "MODEL_FACTORY_CALL_SECONDS": "3"}, timeout=60)
    error = tool_error(proc, "unavailable")
    assert proc.returncode == EXIT_TOOL_ERROR and "within 3 s" in error["message"], error
    proc = mf("get-run", run.run_id, env={**env, "MODEL_FACTORY_CALL_SECONDS": "soon"}, timeout=60)
    assert proc.returncode == EXIT_USAGE and "MODEL_FACTORY_CALL_SECONDS" in proc.stderr and "soon" not in proc.stderr


# -- a person's words at the command line ---------------------------------------------------------


def test_errors_name_options_and_commands_not_json_arguments_and_say_each_problem_once(env, tmp_path):
    bad = cli("plan-run", str(EXAMPLE), "--team", "personal", "--max-steps", "abc", env=env, cwd=tmp_path)
    assert bad.returncode == EXIT_USAGE
    assert "--max-steps: expected an integer" in bad.stderr and bad.stderr.count("expected an integer") == 1
    assert "plan-run --help" in bad.stderr
    for agents in ("mf_", "input schema", "null", "got a string", "arguments."):
        assert agents not in bad.stderr, (agents, bad.stderr)
    secret = cli("plan-run", str(EXAMPLE), "--team", "personal", "--name", "hf_" + "FAKE" * 9, env=env, cwd=tmp_path)
    assert "at --name" in secret.stderr and "- --name:" in secret.stderr and "arguments." not in secret.stderr
    toml = tmp_path / "bad.toml"
    toml.write_text("[trainer\nmax_steps = 3\n")
    invalid = cli("validate-config", str(toml), env=env, cwd=tmp_path)
    assert invalid.stderr.count("Expected ']'") == 1 and f"{toml}:1:9" in invalid.stderr, invalid.stderr
    exists = cli("prepare-config", "basic/reverse-text/rl", str(toml), env=env, cwd=tmp_path)
    assert "prepare-config never overwrites" in exists.stderr and "mf_" not in exists.stderr


def test_help_says_omit_an_option_where_an_agent_would_pass_null(env):
    proc = cli("plan-run", "--help", env=env)
    assert "null" not in proc.stdout.lower() and "or omit it for the configured owner" in " ".join(proc.stdout.split())
    team = cli("plan-run", str(EXAMPLE), "--team", "null", env=env)  # what the help used to suggest
    assert team.returncode != 0  # not a team: the help no longer says to pass it


def test_json_before_the_command_says_to_put_it_after(env):
    proc = cli("--json", "get-run", "x", env=env)
    assert proc.returncode == EXIT_USAGE and "put --json after the command" in proc.stdout


def test_an_emulator_host_this_machine_does_not_have_is_named_as_the_problem(env):
    proc = mf("emulator", "--host", "192.0.2.1", "--port", "18999", env=env, timeout=60)
    assert proc.returncode == 1 and "pick another --host" in proc.stderr and "--port" not in proc.stderr.split(".")[-2]


@pytest.mark.parametrize(("host", "warned"), [("0.0.0.0", True), ("127.0.0.1", False), ("localhost", False)])
def test_an_emulator_listening_beyond_the_loopback_warns_first_and_prints_exports_that_work_here(env, host, warned,
                                                                                                 tmp_path):
    from skill.emulator import DEFAULT_API_KEY

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "skill", "emulator", "--host", host, "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines, exports = emulator_banner(proc)  # everything it prints before it serves
        said = " ".join(" ".join(lines).split())
        export = next(line for line in lines if "export " in line).strip()
        # a wildcard bind is reached on the loopback: the printed URL works from this machine
        url = f"http://{'localhost' if host == 'localhost' else '127.0.0.1'}:{port}"
        assert exports["PRIME_API_BASE_URL"] == exports["PRIME_TRACES_URL"] == url, lines
        assert all(len(line) <= 80 for line in lines if line is not export and "export " not in line), lines
        listed = pasted(f"{export} && {CLI} list-runs", env, tmp_path)  # the export line, pasted as printed
        assert listed.returncode == 0 and "personal account" in listed.stderr, listed.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if warned:  # first, before the exports a person pastes
        assert said.startswith(f"Warning: listening on {host} (every interface), not the loopback"), lines
        assert "other machines" in said and DEFAULT_API_KEY in said and "for testing only" in said, lines
        assert f"This machine reaches it at {url}" in said
        assert said.index("Warning") < said.index("export ")
    else:
        assert "Warning" not in said and lines[0].startswith(f"Model Factory emulator on {url}"), lines


def test_list_runs_past_its_last_page_names_the_last_page_and_shows_latest_steps(env, emulator, launch):
    launch()
    emulator.state.advance(300)
    past = cli("list-runs", "--page", "9223372036854775807", env=env)
    assert past.returncode == 0 and "end on page 1" in past.stderr and "example" not in past.stderr, past.stderr
    piped = cli("list-runs", env=env)
    header, row = piped.stdout.splitlines()[:2]
    assert header.split("\t")[2] == "latest_step" and row.split("\t")[2].isdigit(), piped.stdout


def test_list_runs_shows_latest_steps_on_every_page_and_counts_active_runs_of_the_page_as_such(env, emulator,
                                                                                                 launch):
    made = [launch() for _ in range(3)]
    emulator.state.advance(past_step(4))  # all three RUNNING at step 4
    second = cli("list-runs", "--limit", "2", "--page", "2", env=env)
    header, row = second.stdout.splitlines()
    assert header.split("\t")[2] == "latest_step" and row.split("\t")[1:3] == ["RUNNING", "4"], second.stdout
    assert row.split("\t")[0] in made
    assert second.stderr.startswith("3 runs for the personal account (from default), 1 active on this page (page 2).")
    assert "Details of the newest on this page:" in second.stderr, second.stderr
    whole = cli("list-runs", env=env)
    assert whole.stderr.startswith("3 runs for the personal account (from default), 3 active."), whole.stderr


def test_a_list_runs_page_cut_to_fit_prints_a_narrower_command_that_pastes(env, emulator, launch):
    emulator.state.max_concurrent_runs = 1000  # an account allowed this many runs at once
    made = [launch() for _ in range(40)]
    cut = cli("list-runs", "--limit", "40", env=env)
    note = " ".join(cut.stderr.split())
    assert cut.returncode == 0 and "Part of the result is not shown" in note and "limit=" not in note, cut.stderr
    narrower = re.search(r"Ask for (\d+) runs per page, from the first run of this page: `([^`]+)`", note)
    assert narrower and f"--limit {narrower[1]}" in narrower[2], note
    shown = [line.split("\t")[0] for line in cut.stdout.splitlines()[1:]]
    again = pasted(narrower[2], env)
    rows = [line.split("\t")[0] for line in again.stdout.splitlines()[1:]]
    assert again.returncode == 0 and "not shown" not in again.stderr and len(rows) == int(narrower[1]), again.stderr
    assert rows == shown[:len(rows)] and set(rows) <= set(made)
    code, page = cli_json("list-runs", "--limit", "40", env=env)
    assert f"mf_list_runs(limit={narrower[1]})" in page["narrow_hint"], page  # agents read the call


def hinted(proc: subprocess.CompletedProcess, label: str) -> str:
    """The command a ``Next: <label> `...`.`` hint of ``proc`` prints, as a person copies it."""
    found = re.search(rf"Next: {label} `([^`]+)`", " ".join(proc.stderr.split()))
    assert found, proc.stderr
    return found[1]


def test_list_runs_page_hints_keep_the_limit_and_filters_and_paste_as_printed(env, emulator, launch):
    made = {launch() for _ in range(5)}

    def ids(proc: subprocess.CompletedProcess) -> list[str]:
        assert proc.returncode == 0, proc.stderr
        return [line.split("\t")[0] for line in proc.stdout.splitlines()[1:]]  # piped: a header row, then the runs

    first = cli("list-runs", "--team", "personal", "--status", "queued", "--limit", "2", env=env)
    more = hinted(first, "More:")
    assert "--limit 2" in more and "--team personal" in more and "--status QUEUED" in more, more
    second = pasted(more, env)
    last = pasted(hinted(second, "More:"), env)  # page 3 at 2 runs a page: the fifth run, and no further page
    assert len(ids(first)) == len(ids(second)) == 2 and len(ids(last)) == 1 and "More:" not in last.stderr
    assert set(ids(first) + ids(second) + ids(last)) == made
    past = cli("list-runs", "--limit", "2", "--page", "7", env=env)
    back = hinted(past, "The last page:")
    assert "--limit 2" in back and "--page 3" in back, back
    assert ids(pasted(back, env)) == ids(last)


def test_counts_read_in_the_singular_and_plural(env):
    from skill.emulator import seed

    proc = cli("list-volumes", "--team", seed.TEAM_RESEARCH_ID, env=env)
    assert proc.returncode == 0 and proc.stderr.startswith("1 volume."), proc.stderr
    launches = cli("list-launches", env=env)
    assert "launchs" not in launches.stdout + launches.stderr


def test_the_next_page_of_traces_keeps_the_options_of_the_first(env, emulator, launch):
    run_id = launch()
    emulator.state.advance(3600)
    proc = cli("list-traces", run_id, "--limit", "2", env=env)
    nxt = [line for line in proc.stderr.splitlines() if "Next page" in line]
    assert nxt and "--limit 2" in nxt[0] and "--cursor" in nxt[0], proc.stderr


def test_a_filtered_log_read_that_finds_nothing_says_the_window_in_hours_and_prints_the_wider_command(
        env, emulator, launch):
    run_id = launch()
    emulator.state.advance(7200)  # completed long ago: its lines are older than the 15 minutes a filtered read sees
    quiet = cli("get-logs", run_id, "--level", "WARNING", env=env)
    assert quiet.stderr.startswith("0 lines") and "the window of filtered reads" in quiet.stderr, quiet.stderr
    wider = [line for line in quiet.stderr.splitlines() if "--since-seconds" in line]
    assert wider and "--level WARNING" in wider[0], quiet.stderr
    assert re.search(r"The run ended \d+ h( \d+ min)? ago", quiet.stderr), quiet.stderr  # over an hour: in hours


def test_a_download_with_missing_uploads_names_the_step_numbers_field_honestly(env, emulator, launch, tmp_path):
    run_id = launch("missing_traces", steps=[2])
    emulator.state.advance(3600)
    proc = cli("download-traces", run_id, str(tmp_path / "traces"), env=env)
    rows = dict(line.split("\t", 1) for line in proc.stdout.split("\n\n")[0].splitlines())
    assert rows.get("step_numbers_without_traces") == "2" and "steps_without_traces" not in rows, proc.stdout


def test_a_valid_config_leaves_out_the_long_schema_note(env):
    proc = cli("validate-config", str(EXAMPLE), env=env)
    assert proc.returncode == 0 and "schema_note" not in proc.stdout and "config_path" in proc.stdout


def test_the_plan_summary_names_the_flags_for_more_steps_and_separates_thousands(env, tmp_path):
    smoke = cli("plan-run", str(EXAMPLE), "--team", "personal", env=env, cwd=tmp_path)
    assert "--run-kind full or --max-steps N" in smoke.stdout, smoke.stdout
    big = cli("plan-run", str(EXAMPLE), "--team", "personal", "--max-steps", "10000000", env=env, cwd=tmp_path)
    assert "Steps:         10,000,000 (" in big.stdout, big.stdout
    assert re.search(r"\(~\d{1,3}(,\d{3})+ h \d+ min/", big.stdout), big.stdout


def test_run_report_markdown_names_commands_when_called_from_the_command_line(env, emulator, launch):
    run_id = launch()
    emulator.state.advance(3600)
    proc = cli("run-report", run_id, "--no-plot", env=env)
    assert proc.returncode == 0 and "mf_" not in proc.stdout and "download-traces" in proc.stdout, proc.stdout


def test_run_report_of_a_run_still_going_prints_each_line_once_and_its_next_commands_only_in_the_hint(
        env, emulator, launch):
    run_id = launch()
    emulator.state.advance(300)  # RUNNING: the report is provisional, its Next: names wait-for-run and download-traces
    proc = cli("run-report", run_id, "--no-plot", env=env)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines[0].startswith(f"## Run {run_id}"), proc.stdout
    assert all(line.startswith("- ") for line in lines[1:]) and "wait-for-run" not in proc.stdout, proc.stdout
    assert sum("download-traces" in line for line in lines) == 1, proc.stdout  # in the Traces line, where it is quoted
    assert "Next: The run has not ended (" in proc.stderr and "wait-for-run" in proc.stderr, proc.stderr


def test_preflight_says_a_failed_checks_fix_once_and_names_the_command_not_the_tool(env):
    no_key = {k: v for k, v in env.items() if k != "PRIME_API_KEY"}
    proc = cli("preflight", env=no_key)
    assert proc.returncode == EXIT_CHECK_FAILED and proc.stderr.startswith("Not ready: api_key")
    assert proc.stderr.count("Set PRIME_API_KEY") == 1 and "mf_" not in proc.stderr and " preflight` again" in \
        proc.stderr, proc.stderr


def test_the_readme_shows_the_export_line_the_emulator_prints():
    from skill.emulator.server import export_line

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = readme.split("model-factory emulator --port 8765", 1)[1].split("```", 1)[0]
    shown = " ".join(block.replace("\\\n", " ").split("\n", 1)[1].split())
    assert shown == export_line("http://127.0.0.1:8765"), shown


def test_a_stop_waiting_for_a_person_prints_its_plan_summary_line_by_line(launch, mf_env):
    run_id = launch(after=at_step(2))
    proc = cli("stop-run", run_id, env=mf_env)
    assert proc.returncode == 4, proc.stderr
    lines = proc.stderr.splitlines()
    assert "\\n" not in proc.stderr, proc.stderr
    assert any(line.startswith("  Stop plan stop_") for line in lines), lines
    assert any(line.strip().startswith("Owner:") for line in lines), lines


@pytest.mark.parametrize("command", ["download-traces", "download-checkpoint"])
def test_ctrl_c_in_a_download_says_the_folder_is_incomplete_and_the_same_command_resumes(command):
    from skill.cli import _interrupted_hint

    hint = _interrupted_hint([command, "cabc", "dest"])
    assert "not yet complete" in hint and "run the same command again to resume" in hint


def test_a_config_whose_file_name_is_not_utf8_is_refused_with_what_to_do(tmp_path, mf_env):
    name = os.fsdecode(b"run\xff\xfe.toml")  # a legal POSIX name, not UTF-8 (surrogate-escaped by Python)
    (tmp_path / name).write_text(EXAMPLE.read_text())
    proc = cli("validate-config", str(tmp_path / name), env=mf_env)
    assert proc.returncode == 2, proc.stderr
    assert "not valid UTF-8 text (a file name in another encoding" in proc.stderr
    assert "rename the file to a UTF-8 name" in proc.stderr and "surrogate pair" not in proc.stderr
