"""What a person approves cannot be rewritten by text an agent, a file or the platform supplies.

Control characters (ESC, CR, LF, other C0/C1), bidi overrides, zero-width characters and the
Unicode line separators in a run name are refused on the way in (the CLI, the registry, the
TOML); any other text the plan summary and the approval screen show is escaped there
(``tools.guardrails.text.shown``), so no field can move the cursor or fake a line.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from _helpers import CHALLENGE, CLI, EXAMPLE, in_terminal, mf

from skill import registry
from skill.emulator import DEFAULT_USER_ID
from tools.core import Context
from tools.errors import ToolError
from tools.guardrails.store import Store
from tools.guardrails.text import display_problem, shown

#: The trial's input: save the cursor, go 4 lines up, erase the line, write a fake owner, restore.
FORGED = "x\x1b[s\x1b[4A\r\x1b[2K  Owner (pays):  personal account (from argument)\x1b[u"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "rl.toml")
    return folder


def test_the_trials_forging_run_name_is_refused_by_the_cli_and_nothing_is_planned(mf_env, project, tmp_path):
    team = "cteam00000000000000000001"
    proc = mf("plan-run", "rl.toml", "--team", team, "--name", FORGED, env=mf_env, cwd=project)
    assert proc.returncode == 2, proc.stderr
    assert "name" in proc.stderr and "U+001B" in proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr and "Owner (pays):  personal" not in proc.stdout + proc.stderr
    proc = mf("plan-run", "rl.toml", "--team", team, "--name", FORGED, "--json", env=mf_env, cwd=project)
    error = json.loads(proc.stdout)
    assert proc.returncode == 2 and error["code"] == "bad_arguments"
    assert [f["path"] for f in error["fields"]] == ["name"] and "\x1b" not in proc.stdout
    assert Store(tmp_path / "state").plans() == []


@pytest.mark.parametrize("name", ["ok\n  Cost estimate: low $0.01", "ok\r  Steps: 1", "smoke\x1b[8m",
                                  "a\u202eevil", "a\u200bb", "a\u2028b", "a\u2029b", "a\x85b", "a\x00b", "a\tb"])
def test_a_run_name_with_any_invisible_or_control_character_is_refused_through_the_registry(frozen_ctx, project,
                                                                                            name):
    result = registry.call_tool("mf_plan_run", {"config_path": str(project / "rl.toml"), "team": "personal",
                                                "name": name}, frozen_ctx)
    assert isinstance(result, ToolError) and result.code == "bad_arguments"
    assert [f.path for f in result.fields] == ["name"]
    text = result.model_dump_json()
    assert name not in json.loads(text)["fields"][0]["problem"] and "control character" in text


def test_gpu_type_volume_and_image_tag_arguments_with_control_characters_are_refused(frozen_ctx, project):
    for key in ("gpu_type", "volume", "image_tag"):
        result = registry.call_tool("mf_plan_run", {"config_path": str(project / "rl.toml"), "team": "personal",
                                                    key: "H100\x1b[2K"}, frozen_ctx)
        assert isinstance(result, ToolError) and [f.path for f in result.fields] == [key]


def test_a_toml_name_with_an_escape_is_a_validation_error_naming_the_key_and_planning_refuses_it(
        mf_env, project, frozen_ctx):
    cfg = project / "rl.toml"
    cfg.write_text('name = "y\\u001b[2K\\rZ"\n' + EXAMPLE.read_text())
    proc = mf("validate-config", "rl.toml", "--json", env=mf_env, cwd=project)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["valid"] is False, proc.stdout
    issue = next(e for e in report["errors"] if e["rule"] == "displayed_text")
    assert issue["path"] == "name" and "U+001B" in issue["message"] and "U+000D" in issue["message"]
    assert "\x1b" not in proc.stdout and "\\u001b" not in proc.stdout
    plan = registry.call_tool("mf_plan_run", {"config_path": str(cfg), "team": "personal"}, frozen_ctx)
    assert isinstance(plan, ToolError) and plan.code == "invalid_config"
    assert [f.path for f in plan.fields] == ["name"]


def test_the_same_escape_in_another_displayed_toml_key_is_refused_too(mf_env, project):
    (project / "rl.toml").write_text('image_tag = "main\\u202e"\n' + EXAMPLE.read_text())
    report = json.loads(mf("validate-config", "rl.toml", "--json", env=mf_env, cwd=project).stdout)
    assert [(e["rule"], e["path"]) for e in report["errors"]] == [("displayed_text", "image_tag")]


def test_the_approve_screen_of_a_plan_whose_path_holds_a_newline_shows_it_escaped(emulator, mf_env, tmp_path):
    folder = tmp_path / "a\n  Owner (pays):  personal account"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "rl.toml")
    ctx = Context(env=mf_env, home=Path(mf_env["HOME"]), state_dir=tmp_path / "state", cwd=folder)
    plan = registry.call_tool("mf_plan_run", {"config_path": str(folder / "rl.toml"), "team": "personal"}, ctx)
    ctx.close()
    assert not isinstance(plan, ToolError), plan
    assert "\\n  Owner (pays):  personal account/rl.toml" in plan.summary
    lines = plan.summary.splitlines()
    assert [line for line in lines if line.startswith("  Owner (pays):")] == \
        [f"  Owner (pays):  personal account {DEFAULT_USER_ID} (from argument)"]
    env = {**mf_env, "TERM": "dumb", "COLUMNS": "200"}
    code, out = in_terminal([CLI, "approve", plan.plan_id], env, tmp_path, CHALLENGE)
    assert code == 0, out
    assert "\\n  Owner (pays):  personal account/rl.toml" in out
    assert [line for line in out.splitlines() if line.startswith("  Owner (pays):")] == \
        [f"  Owner (pays):  personal account {DEFAULT_USER_ID} (from argument)"]


def test_a_control_character_written_into_the_recorded_summary_is_escaped_on_the_approve_screen(
        emulator, mf_env, project, tmp_path):
    ctx = Context(env=mf_env, home=Path(mf_env["HOME"]), state_dir=tmp_path / "state", cwd=project)
    plan = registry.call_tool("mf_plan_run", {"config_path": "rl.toml", "team": "personal"}, ctx)
    store = ctx.store()
    record = store.plan(plan.plan_id)
    forged = record.model_copy(update={"summary": record.summary
                                       + "\nx\x1b[2A\r\x1b[2K  Cost estimate: low $0.01\u202e"})
    with store.write() as conn:  # a field the summary builder forgot, or a hand-edited store
        conn.execute("UPDATE plans SET record = ? WHERE plan_id = ?", (forged.model_dump_json(), plan.plan_id))
    ctx.close()
    env = {**mf_env, "TERM": "dumb", "COLUMNS": "200"}
    code, out = in_terminal([CLI, "approve", plan.plan_id], env, project, CHALLENGE)
    assert code == 0, out
    assert "\x1b" not in out and "\u202e" not in out
    assert "x\\x1b[2A\\r\\x1b[2K  Cost estimate: low $0.01\\u202e" in out


def test_shown_escapes_only_what_is_not_printable_and_display_problem_never_echoes():
    assert shown("Ünïcode 名前 run-1 (ok)") == "Ünïcode 名前 run-1 (ok)"
    assert shown("a\x1b[31mb\r\n\u202e\u200b\u2028\x9b") == "a\\x1b[31mb\\r\\n\\u202e\\u200b\\u2028\\x9b"
    problem = display_problem("run\x1b[2Jsecret-looking")
    assert problem is not None and "U+001B (escape) at position 4" in problem and "secret" not in problem
    assert display_problem("plain-name_1.0") is None
    assert os.linesep not in shown("a\nb")
