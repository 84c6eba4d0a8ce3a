"""The guard hook an agent host runs before its agent's commands: what it blocks, what it lets through,
the host's protocol (JSON on stdin, exit 2 blocks), and installing it into a host's settings file
beside the settings already there."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from skill import hostguard, install

HOME = "/home/person"
STATE = f"{HOME}/.local/state/model-factory"

BLOCKED = [
    "model-factory approve plan_0123456789ab",
    "/opt/tools/bin/model-factory approve plan_0123456789ab",
    "MODEL_FACTORY_STATE_DIR=/tmp/s model-factory approve plan_0123456789ab",
    "uv run model-factory approve plan_0123456789ab",
    "python -m skill approve plan_0123456789ab",
    "(sleep 3; echo 89ab) | script -qc 'model-factory approve plan_0123456789ab' /dev/null",
    "bash -c \"model-factory approve plan_0123456789ab\"",
    "cd /tmp && model-factory approve plan_0123456789ab",
    "prime train run rl.toml --yes",
    "prime train stop crun0123 -y",
    "prime train delete crun0123 --yes",
    "prime train restart crun0123 --yes",
    f"sqlite3 {STATE}/state.db \"insert into approvals values (1)\"",
    "echo '{}' >> ~/.local/state/model-factory/launches.jsonl",
    "cp forged.db $HOME/.local/state/model-factory/state.db",
    "rm -rf ${XDG_STATE_HOME}/model-factory",
    "python -c \"import sqlite3; sqlite3.connect('/home/person/.local/state/model-factory/state.db')\"",
    "cat /srv/mf-state/state.db",  # the state folder the hook was installed for, wherever it is
]
ALLOWED = [
    "model-factory plan-run rl.toml --team personal --json",
    "model-factory dispatch-run plan_0123456789ab --confirmation mfc_plan_0123456789ab_" + "0" * 40,
    "model-factory history --since 1d",
    f"MODEL_FACTORY_STATE_DIR={STATE} model-factory list-launches --json",
    "prime train run rl.toml",  # prime asks its own question without --yes
    "prime train logs crun0123 --yes",
    "prime train list",
    "ls -la && git status",
    "pytest tests/test_launch.py -q",
    "cat rl.toml | grep max_steps",
    "echo approve",
    "grep -r model-factory README.md",
]


@pytest.mark.parametrize("command", BLOCKED)
def test_the_hook_blocks_approving_prime_with_yes_and_touching_the_state_folder(command):
    why = hostguard.decide(command, ["/srv/mf-state"], home=HOME, state_home=f"{HOME}/.local/state")
    assert why, command


@pytest.mark.parametrize("command", ALLOWED)
def test_the_hook_lets_ordinary_commands_and_model_factorys_own_through(command):
    assert hostguard.decide(command, ["/srv/mf-state"], home=HOME, state_home=f"{HOME}/.local/state") is None


def test_the_hook_blocks_a_file_tool_writing_into_the_state_folder_only():
    assert hostguard.decide_write(f"{STATE}/state.db", [], home=HOME)
    assert hostguard.decide_write("/srv/mf-state/x.json", ["/srv/mf-state"], home=HOME)
    assert hostguard.decide_write(f"{HOME}/project/rl.toml", ["/srv/mf-state"], home=HOME) is None


def run_hook(call: dict, *args: str) -> subprocess.CompletedProcess:
    """The hook as the host runs it: the command install-skill writes, the tool call on stdin."""
    return subprocess.run([sys.executable, "-I", str(Path(hostguard.__file__)), *args], input=json.dumps(call),
                          capture_output=True, text=True, timeout=60)


def test_the_host_protocol_exit_2_with_the_reason_blocks_exit_0_passes(tmp_path):
    blocked = run_hook({"tool_name": "Bash", "tool_input": {"command": "model-factory approve plan_0123456789ab"}},
                       "--state", str(tmp_path))
    assert blocked.returncode == 2 and blocked.stdout == ""
    assert "guard hook" in blocked.stderr and "person" in blocked.stderr
    write = run_hook({"tool_name": "Write", "tool_input": {"file_path": str(tmp_path / "state.db"), "content": "x"}},
                     "--state", str(tmp_path))
    assert write.returncode == 2
    passed = run_hook({"tool_name": "Bash", "tool_input": {"command": "ls"}}, "--state", str(tmp_path))
    assert (passed.returncode, passed.stdout, passed.stderr) == (0, "", "")


def test_the_hook_reads_stdin_in_process_as_well(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("not json"))
    assert hostguard.main([]) == 0  # not a tool call it knows: the host decides
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"tool_input": {"command": "prime train run x --yes"}})))
    assert hostguard.main([]) == 2 and "prime train run --yes" in capsys.readouterr().err


@pytest.mark.parametrize("agent", sorted(install.HOOK_FILES))
def test_installing_the_hook_keeps_every_other_setting_and_can_be_removed(tmp_path, agent):
    settings = tmp_path / install.HOOK_FILES[agent].removeprefix("~/")
    settings.parent.mkdir(parents=True)
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-own-check"}]}
    settings.write_text(json.dumps({"model": "x", "hooks": {"PreToolUse": [mine], "Stop": []}}))
    change = install.install_hook(agent, tmp_path / "state", home=tmp_path)
    data = json.loads(settings.read_text())
    assert change.status == "installed" and data["model"] == "x" and data["hooks"]["Stop"] == []
    ours = data["hooks"]["PreToolUse"][1]
    assert data["hooks"]["PreToolUse"][0] == mine and ours["matcher"] == install.HOOK_MATCHERS[agent]
    assert ours["hooks"][0]["command"] == install.hook_command(tmp_path / "state")
    assert install.install_hook(agent, tmp_path / "state", home=tmp_path).status == "unchanged"
    assert install.remove_hook(agent, home=tmp_path).status == "removed"
    assert json.loads(settings.read_text()) == {"model": "x", "hooks": {"PreToolUse": [mine], "Stop": []}}
    assert install.remove_hook(agent, home=tmp_path).status == "absent"


def test_a_settings_file_that_does_not_parse_is_left_as_it_is(tmp_path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ not json")
    with pytest.raises(install.InstallError, match="not valid JSON"):
        install.install_hook("claude-code", tmp_path / "state", home=tmp_path)
    assert settings.read_text() == "{ not json"
    with pytest.raises(install.InstallError, match="no hook"):
        install.install_hook("cursor", tmp_path / "state", home=tmp_path)


def test_install_skill_with_hook_installs_it_and_says_how_to_remove_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path))
    out, err = io.StringIO(), io.StringIO()
    assert install.main(tmp_path / "skills", agent="claude-code", hook=True, out=out, err=err) == 0
    assert "Installed the guard hook" in out.getvalue() and "--remove-hook" in err.getvalue()
    hooks = json.loads((tmp_path / ".claude" / "settings.json").read_text())["hooks"]["PreToolUse"]
    assert install.HOOK_SCRIPT in hooks[0]["hooks"][0]["command"]
    out, err = io.StringIO(), io.StringIO()
    assert install.main(agent="claude-code", remove=True, out=out, err=err) == 0
    assert "Removed the guard hook" in out.getvalue()


class _Screen(io.StringIO):
    """What a terminal of COLUMNS columns shows (it says it is one)."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("agent", ["codex", "claude-code", "cursor"])
def test_install_skill_and_mcp_config_fit_80_columns_with_each_command_whole(tmp_path, monkeypatch, agent):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path))
    out, err = _Screen(), _Screen()
    assert install.main(tmp_path / "skills", agent=agent, hook=True, out=out, err=err) == 0
    install.mcp_config_main(agent, out=io.StringIO(), err=err)
    lines = (out.getvalue() + err.getvalue()).splitlines()
    commands = [line for line in lines if "model-factory" in line.split(" ", 1)[0]]
    long = [line for line in lines if len(line) > 80 and line not in commands and len(line.split()) > 1]
    assert commands and not long, long  # a path wider than the screen stands alone on its line
    assert not any("`" in line for line in lines if "model-factory " in line and line not in commands), lines
