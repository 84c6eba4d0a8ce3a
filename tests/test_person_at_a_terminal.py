"""A person at a terminal: the main commands rendered in an 80-column pseudo-terminal and in a pipe,
an install that puts ``model-factory`` on PATH (``uv tool install``), and every command the human
output prints, run as printed in a shell whose PATH holds only that install and the system's own
folders.

The install test needs uv and the package registry (or uv's cache) for the dependencies; CI
requires it (``MF_REQUIRE_INSTALL=1``), elsewhere it is skipped without uv.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _helpers import EXAMPLE, approved_launch, emulator_env, in_terminal, mf, unavailable

from skill import terminal
from skill.demo import SCENARIOS
from tools.core import Context
from tools.platform import wire

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;]*m")
BACKTICKED = re.compile(r"`([^`\n]+)`")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


# -- a run to look at ----------------------------------------------------------------------------


@pytest.fixture
def world(emulator, tmp_path):
    """The emulator with one completed run, a working folder, and the environment a person exports."""
    home, work, state = tmp_path / "home", tmp_path / "work", tmp_path / "state"
    for folder in (home, work, state):
        folder.mkdir()
    # no PATH: each test puts the folders it means on it
    env = emulator_env(emulator, PRIME_FRONTEND_URL=emulator.base_url, PRIME_DISABLE_VERSION_CHECK="1", HOME=str(home),
                       MODEL_FACTORY_STATE_DIR=str(state), LANG="C.UTF-8")
    ctx = Context(env=env, home=home, state_dir=state)
    plan, run = approved_launch(ctx, EXAMPLE)
    ctx.close()
    emulator.state.advance(3600)
    return {"env": env, "work": work, "run_id": run.run_id, "plan_id": plan.plan_id, "emulator": emulator}


def main_commands(w: dict) -> list[list[str]]:
    run = w["run_id"]
    return [["preflight"], ["list-examples"], ["validate-config", "basic/reverse-text/rl"],
            ["plan-run", "basic/reverse-text/rl", "--team", "personal"], ["list-runs"], ["get-run", run],
            ["check-progress", run], ["get-metrics", run], ["list-checkpoints", run], ["list-traces", run],
            ["summarize-logs", run], ["get-logs", run, "--tail-lines", "30"],
            ["download-traces", run, str(w["work"] / "traces")], ["get-run", "no-such-run"]]


# -- an 80-column pseudo-terminal -------------------------------------------------------------------


def seen(args: list[str], env: dict[str, str], cwd: Path) -> str:
    """What a person sees of ``python -m skill ARGS`` at an 80-column terminal (colours left out)."""
    return ANSI.sub("", in_terminal([sys.executable, "-m", "skill", *args], env, cwd, timeout=300)[1])


def split_tokens(text: str, tokens: list[str]) -> list[str]:
    """Lines that end in the start of a token without holding the token: a split id or path."""
    bad = []
    for line in text.splitlines():
        last = line.split()[-1] if line.split() else ""
        bad += [line for t in tokens if 4 <= len(last) < len(t) and t.startswith(last) and t not in line]
    return bad


def test_the_main_commands_fit_80_columns_without_splitting_an_id_a_path_or_a_command(world):
    env = {**world["env"], "PATH": os.environ["PATH"], "TERM": "xterm"}
    tokens = [world["run_id"], world["plan_id"], str(EXAMPLE), str(world["work"] / "traces")]
    for args in main_commands(world):
        text = seen(args, env, world["work"])
        assert "Traceback" not in text, text
        assert not split_tokens(text, tokens + re.findall(r"\bc[a-z0-9]{24}\b", text)), (args, text)
        wide = [line for line in text.splitlines() if len(line) > 80 and len(terminal.words(line)) > 1
                and not ours(line)]
        assert not wide, (args, wide)
        # a command is printed bare on a line of its own (it pastes whole), never inline in backticks
        assert not [c for c in BACKTICKED.findall(text) if ours(c)], (args, text)
    overview = seen(["list-runs"], env, world["work"])
    assert world["run_id"] in overview and "COMPLETED" in overview


def test_the_demo_of_a_failed_run_fits_80_columns(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TERM": "xterm"}
    text = seen(["demo", "--scenario", "failed"], env, tmp_path)
    assert "Failure analysis" in text and "failed (FAILED" in text, text
    run_id = re.search(r"run (c[a-z0-9]{24}) created", text)[1]
    assert not split_tokens(text, [run_id])
    assert not [line for line in text.splitlines() if len(line) > 80 and len(terminal.words(line)) > 1
                and not ours(line)]
    assert not [c for c in BACKTICKED.findall(text) if ours(c)], text
    assert [line for line in text.splitlines() if ours(line) and run_id in line], text  # its hints, whole


def test_piped_output_is_tab_separated_data_without_padding_or_colour(world):
    env = {**world["env"], "PATH": os.environ["PATH"], "TERM": "xterm"}
    for args in main_commands(world):
        done = mf(*args, env=env, cwd=world["work"], timeout=300)
        assert "\x1b[" not in done.stdout + done.stderr, args
        # no padding (a row may end in a tab: its last cell is empty, the columns stay the same)
        assert not [line for line in done.stdout.splitlines() if line != line.rstrip(" ")], args
        for section in piped_sections(done.stdout)[1:]:  # each table: every row has the header's fields
            assert len({len(row) for row in section}) == 1, (args, done.stdout)
        if args[0] in ("list-runs", "list-examples", "list-checkpoints", "list-traces"):
            rows = [line.split("\t") for line in done.stdout.splitlines() if line]
            assert len(rows) > 1 and len({len(r) for r in rows}) == 1, (args, done.stdout)
            assert all("  " not in cell for row in rows for cell in row), args
    runs = mf("list-runs", env=env, cwd=world["work"])
    assert runs.stdout.splitlines()[1].split("\t")[0] == world["run_id"]  # `| cut -f1` gives the ids


# -- installed with uv tool install ---------------------------------------------------------------


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """``uv tool install`` of this checkout into temporary tool folders; the folder holding the
    ``model-factory`` a person's PATH would find."""
    uv = shutil.which("uv")
    if uv is None:
        unavailable("uv is not on PATH", "MF_REQUIRE_INSTALL")
    base = tmp_path_factory.mktemp("uv-tool")
    env = {**os.environ, "UV_TOOL_DIR": str(base / "tools"), "UV_TOOL_BIN_DIR": str(base / "bin")}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run([uv, "tool", "install", "--python", sys.executable, str(ROOT)], env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"uv tool install failed: {done.stderr[-2000:]}")
    assert (base / "bin" / "model-factory").exists()
    return base / "bin"


def persons_shell(bin_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a person's shell: the installed tool and the system's folders on PATH."""
    return {"PATH": f"{bin_dir}:{SYSTEM_PATH}", "LANG": "C.UTF-8", **(extra or {})}


def shell(command: str, env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", command], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


#: The tests that use the one ``uv tool install`` of the session run in one worker (it is built once there).
INSTALL_GROUP = pytest.mark.xdist_group("uv-tool-install")


@INSTALL_GROUP
def test_a_uv_tool_install_puts_model_factory_on_the_persons_path(installed, tmp_path):
    env = persons_shell(installed, {"HOME": str(tmp_path)})
    version = shell("model-factory --version", env, tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("model-factory-skill "), version.stderr
    help_ = shell("model-factory approve --help", env, tmp_path)
    assert help_.returncode == 0 and "PLAN_ID" in help_.stdout
    # the installation names itself bare: the person's shell finds it
    refused = shell("model-factory approve plan_000000000000 --json", env, tmp_path)
    assert "Run `model-factory approve plan_000000000000`" in refused.stderr


# -- every command printed works as printed -----------------------------------------------------------


def printed_commands(text: str) -> list[tuple[str, str]]:
    """``(command, the line around it)`` for each command in backticks."""
    flat = " ".join(text.split())
    return [(m[1], flat[max(0, m.start() - 200):m.end() + 200]) for m in BACKTICKED.finditer(flat)]


def ours(command: str) -> bool:
    """A command of ours: ``[VAR=value ...] model-factory ...`` (bare or an absolute path)."""
    try:
        words = shlex.split(command)
    except ValueError:  # not shell words
        return False
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        words.pop(0)
    return bool(words) and Path(words[0]).name == "model-factory"


#: Wall seconds after which a printed command still running counts as started: it got past its arguments (a
#: command not found or a usage error ends within a second), and is serving (emulator, mcp) or waiting on a run.
STARTED_SECONDS = 20


def run_as_printed(command: str, env: dict[str, str], cwd: Path) -> int:
    """Run ``command`` in a shell as printed: its exit code, or 0 when it is still running after
    :data:`STARTED_SECONDS` (then stopped)."""
    proc = subprocess.Popen(["/bin/sh", "-c", command], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        return proc.wait(timeout=STARTED_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        return 0


# Many commands in one test (each its own process or fault): a bound for a hang that fits that much work on a
# machine loaded ten times over (the default 300 s is per test, sized for one command's work).
@pytest.mark.timeout(1200)
@INSTALL_GROUP
def test_every_command_the_human_output_prints_runs_as_printed(installed, world):
    env = persons_shell(installed, world["env"])
    work = world["work"]
    outputs: list[str] = []

    def person(command: str) -> subprocess.CompletedProcess:
        done = shell(command, env, work, timeout=400)
        assert "Traceback" not in done.stderr, done.stderr
        outputs.append(done.stdout + done.stderr)
        return done

    person("model-factory preflight")
    person("model-factory list-examples")
    person("model-factory prepare-config basic/reverse-text/rl my-run.toml")
    person("model-factory validate-config my-run.toml")
    person("model-factory plan-run my-run.toml")  # owner not named: the fix names the choices
    planned = person("model-factory plan-run my-run.toml --team personal")
    plan_id = re.search(r"Planned (plan_[0-9a-f]+)", planned.stderr)[1]
    person(f"model-factory dispatch-run {plan_id}")  # no confirmation yet: the fix names the approval
    for args in main_commands(world):
        person(shlex.join(["model-factory", *args]))
    for scenario in SCENARIOS:  # on the running emulator, so the commands they print keep working
        # (--speed 1000: each second the demo waits moves the emulator 1,000 s, so each ends within seconds)
        person(f"model-factory demo --scenario {scenario} --speed 1000 --dest demo-{scenario}")

    human = "\n".join(outputs)
    assert "mf_" not in human and not re.search(r"\b[a-z_]+='[^']*'", human)
    commands = printed_commands(human)
    run_ids = {c for c, _ in commands if ours(c)}
    assert len(run_ids) >= 20, sorted(run_ids)  # plenty of hints were printed and will be run
    # side by side: most of a command's time is start-up, and a server command (emulator, mcp) is left 10 s
    with ThreadPoolExecutor(4) as pool:
        ours_sorted = sorted(run_ids)
        codes = dict(zip(ours_sorted, pool.map(lambda c: run_as_printed(c, env, work), ours_sorted), strict=True))
    failures = [(code, command) for command, code in codes.items() if code in (127, 2)]
    assert not failures, failures
    for command, around in commands:
        if command.startswith("prime "):
            assert "prime CLI" in around, around


def piped_sections(stdout: str) -> list[list[list[str]]]:
    """Piped stdout as its sections (separated by an empty line), each a list of tab-separated rows."""
    return [[line.split("\t") for line in block.splitlines()] for block in stdout.strip("\n").split("\n\n")]


def test_piped_check_progress_holds_the_same_facts_whether_or_not_the_result_has_a_table(world):
    """A healthy run that ended (no env servers left) and a crash-looping one (an env-server table):
    stdout holds the facts as name<TAB>value rows in both, the table after them, and no prose."""
    emulator, env = world["emulator"], {**world["env"], "PATH": os.environ["PATH"]}
    ctx = Context(env=world["env"])
    emulator.state.set_scenario("crash_loop", at_step=2)
    looping = ctx.platform().create_run(wire.build_create_body(
        tomllib.loads(EXAMPLE.read_text()), name="crash-loop")).run_id
    ctx.close()
    emulator.state.advance(600)
    facts = {}
    for run_id in (world["run_id"], looping):
        done = mf("check-progress", run_id, env=env, cwd=world["work"])
        sections = piped_sections(done.stdout)
        assert all(len(row) == 2 for row in sections[0]), done.stdout
        assert not [line for line in done.stdout.splitlines() if line.startswith("- ")], done.stdout
        assert "- Latest step" in done.stderr  # the evidence, for a person, on stderr
        facts[run_id] = {row[0] for row in sections[0]}
        tables = [s[0] for s in sections[1:]]
        assert (["env_name", "status", "pod_name"] in tables) == (run_id == looping), done.stdout
    assert {"last_step_age_seconds", "seconds_per_step"} <= facts[world["run_id"]] & facts[looping]


def test_piped_validate_config_prints_its_facts_on_stdout_with_or_without_errors(world, tmp_path):
    env = {**world["env"], "PATH": os.environ["PATH"]}
    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.read_text() + "\n[trainer.nonsense]\nwhat = 1\n")
    names = []
    for config in (str(EXAMPLE), str(bad)):
        done = mf("validate-config", config, env=env, cwd=world["work"])
        sections = piped_sections(done.stdout)
        assert all(len(row) == 2 for row in sections[0]), done.stdout
        names.append([row[0] for row in sections[0]])
        assert (config == str(bad)) == (len(sections) > 1 and sections[1][0][:2] == ["path", "line"]), done.stdout
    assert names[0][0] == names[1][0] == "config_path" and "mode" in names[0] and "mode" in names[1]
