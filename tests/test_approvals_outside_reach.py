"""Approvals an agent cannot make: the trials of the approval gate, replayed.

* Writing the old ledger in the working folder (an ``approval`` line with a code of one's choosing):
  nothing in the working folder is ever read as an approval, so dispatch refuses, and an approval
  row imported from an old ledger is never one.
* Faking the terminal: ``approve`` under ``script`` with the plan id's last characters piped in (the
  old challenge) issues no code; under an agent host's shell marker it refuses before asking.
* One state for every working folder: a plan made in one folder is seen, and not launched twice,
  from another.
* A store the agent's sandbox cannot write: reads work, actions refuse before sending anything.
* Two API keys' personal accounts are two owners.

Real HTTP against the emulator, real files, the CLI in new processes where the process boundary is
what is tested (the working folder, the terminal, the sandbox).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
from _helpers import CLI, EXAMPLE, TOKEN, cli_env, dispatch, err, mf_json, ok, planned, unavailable

from skill.approval import AGENT_MARKERS, CHALLENGE_LETTERS, agent_marker, new_challenge
from skill.emulator import OTHER_API_KEY, EmulatorServer
from skill.exit_codes import EXIT_CONFIRMATION
from tools.core import Context
from tools.guardrails import confirmation as gate
from tools.guardrails.records import iso, utc_now
from tools.launch import ListLaunchesInput, PlanRunInput, approve_plan, list_launches, plan_run


@pytest.fixture
def world(emulator: EmulatorServer, tmp_path: Path) -> dict:
    """A person's home (its per-user store) and an agent's project folder holding the config."""
    emulator.state.set_speed(0)
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    shutil.copy(EXAMPLE, project / "rl.toml")
    env = {k: v for k, v in cli_env(emulator, home, tmp_path / "unused").items() if k != "MODEL_FACTORY_STATE_DIR"}
    return {"home": home, "project": project, "env": env,
            "store": home / ".local" / "state" / "model-factory"}


def agent_ctx(world: dict, cwd: Path | None = None, **env: str) -> Context:
    """The agent's tools in ``cwd`` (default: the project), its per-user store, no wall time spent waiting."""
    return Context(env={**world["env"], **env}, home=world["home"], cwd=cwd or world["project"],
                   sleep=lambda seconds: None)


def forged_approval(plan_id: str, plan_hash: str) -> tuple[str, dict]:
    """A code of the agent's choosing and the approval line the old ledger would have taken from it."""
    code = f"mfc_{plan_id}_{secrets.token_hex(20)}"
    return code, {"ts": iso(utc_now()), "event": "approval", "plan_id": plan_id, "plan_hash": plan_hash,
                  "token_sha256": hashlib.sha256(code.encode()).hexdigest(), "channel": "terminal",
                  "owner": "personal", "expires_at": "2099-01-01T00:00:00.000+00:00"}


def test_the_ledger_append_forgery_is_refused_and_nothing_in_the_working_folder_is_an_approval(emulator, world):
    ctx = agent_ctx(world)
    plan = planned(ctx, "rl.toml", team="personal")
    ctx.close()
    assert not (world["project"] / ".model-factory").exists()  # the store is the user's, not the project's
    # The trial: append an approval of a code of one's choosing to the old ledger in the working folder.
    code, line = forged_approval(plan.plan_id, plan.plan_hash)
    ledger = world["project"] / ".model-factory" / "launches.jsonl"
    ledger.parent.mkdir()
    ledger.write_text(json.dumps(line) + "\n")
    restarted = agent_ctx(world)  # a new session opens the store: the old file is imported, its approval never
    refused = err(dispatch(restarted, plan.plan_id, code), "confirmation_invalid")
    assert code not in refused.model_dump_json()
    assert gate.launch_state(restarted.store(), plan.plan_id).approvals == []
    restarted.close()
    assert emulator.state.create_attempts == 0 and len(emulator.state.runs) == 0


def test_a_plan_and_approval_imported_from_an_old_ledger_are_never_sent(emulator, world):
    # An old ledger holding a plan and an approval row (a person's once, or a forgery: it cannot tell).
    probe = agent_ctx(world, cwd=world["home"])
    real = planned(probe, world["project"] / "rl.toml", team="personal")
    record = probe.store().plan(real.plan_id)
    probe.close()
    code, approval = forged_approval("plan_0ld0ld0ld0ld", record.plan_hash)
    old = {"ts": iso(utc_now()), "event": "plan", "plan_id": "plan_0ld0ld0ld0ld", "plan_hash": record.plan_hash,
           **record.material, "arguments": record.arguments, "config_path": record.config_path,
           "summary": "Plan plan_0ld0ld0ld0ld: nothing launched"}
    ledger = world["project"] / ".model-factory" / "launches.jsonl"
    ledger.parent.mkdir()
    ledger.write_text(json.dumps(old) + "\n" + json.dumps(approval) + "\n")
    ctx = agent_ctx(world)
    refused = err(dispatch(ctx, "plan_0ld0ld0ld0ld", code), "unknown_plan")
    assert "imported from the old ledger" in refused.message and "never approved or sent" in refused.message
    with pytest.raises(Exception) as failure:  # nor can a person's terminal approve it
        approve_plan("plan_0ld0ld0ld0ld", "terminal", ctx)
    assert "imported" in str(failure.value.error.message)
    ctx.close()
    assert emulator.state.create_attempts == 0


def script_approve(plan_id: str, env: dict, cwd: Path, typed: str) -> subprocess.CompletedProcess:
    """``approve`` run under ``script`` (a pseudo-terminal the caller drives) with ``typed`` piped in."""
    if shutil.which("script") is None:
        unavailable("util-linux script is not installed", "MF_REQUIRE_INSTALL")
    return subprocess.run(["script", "-qec", f"{CLI} approve {plan_id}", "/dev/null"], input=typed, env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_approve_under_script_with_the_old_challenge_or_in_an_agent_shell_issues_no_code(emulator, world):
    ctx = agent_ctx(world)
    plan = planned(ctx, "rl.toml", team="personal")
    old_challenge = plan.plan_id[-4:] + "\n"
    faked = script_approve(plan.plan_id, world["env"], world["project"], old_challenge * 3)
    assert faked.returncode == EXIT_CONFIRMATION and not TOKEN.search(faked.stdout), faked.stdout
    assert "type the letters" in faked.stdout and "Not approved" in faked.stdout
    marked = script_approve(plan.plan_id, {**world["env"], "CLAUDECODE": "1"}, world["project"], old_challenge)
    assert marked.returncode == EXIT_CONFIRMATION and not TOKEN.search(marked.stdout + marked.stderr)
    said = " ".join((marked.stdout + marked.stderr).split())
    assert "Claude Code set CLAUDECODE" in said and "in a terminal of your own" in said
    assert "type the letters" not in said  # refused before the plan is even shown
    assert gate.launch_state(ctx.store(), plan.plan_id).approvals == []
    ctx.close()


@pytest.mark.parametrize("name,host,value", AGENT_MARKERS)
def test_every_agent_hosts_shell_marker_is_recognised(name, host, value):
    assert agent_marker({name: value or "1"}) == (name, host)
    assert agent_marker({}) is None and agent_marker({name: ""}) is None
    if value is not None:  # a marker with a known value: any other value is not that host's
        assert agent_marker({name: "something-else"}) is None


def test_the_check_word_is_random_and_never_spelled_by_a_plan_id():
    words = {new_challenge() for _ in range(50)}
    assert len(words) > 45 and not set("abcdef0123456789") & set(CHALLENGE_LETTERS)
    assert all(len(w) == 5 and set(w) <= set(CHALLENGE_LETTERS) for w in words)


def test_two_processes_in_two_working_folders_share_one_state_and_launch_once(emulator, world, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    agent = agent_ctx(world)  # this process, in the project folder
    plan = planned(agent, "rl.toml", team="personal")
    person = agent_ctx(world, cwd=world["home"])  # the person's terminal, in their home folder
    code = approve_plan(plan.plan_id, "terminal", person)
    person.close()
    first = ok(dispatch(agent, plan.plan_id, code))
    agent.close()
    # Another process in another folder: the same store, so the same plan, launched once.
    exit_code, again = mf_json("dispatch-run", plan.plan_id, "--confirmation", code, env=world["env"], cwd=other)
    assert (exit_code, again["status"], again["run_id"]) == (0, "already_dispatched", first.run_id)
    assert len(emulator.state.runs) == 1 and emulator.state.create_attempts == 1
    elsewhere = agent_ctx(world, cwd=other)
    [entry] = ok(list_launches(ListLaunchesInput(), elsewhere)).launches
    assert (entry.plan_id, entry.status, entry.run_id) == (plan.plan_id, "dispatched", first.run_id)
    elsewhere.close()


def read_only(folder: Path, args: list[str]) -> list[str]:
    """``args`` run where ``folder`` is mounted read-only (a user and mount namespace: as an agent sandbox
    that lets the shell write only the workspace sees the state folder)."""
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        unavailable("unprivileged user and mount namespaces (unshare -rm) are not available", "MF_REQUIRE_INSTALL")
    mount = f'mount --bind "{folder}" "{folder}" && mount -o remount,bind,ro "{folder}" && exec "$@"'
    return ["unshare", "-rm", "sh", "-c", mount, "sh", *args]


def test_a_store_the_sandbox_cannot_write_reads_and_refuses_actions_before_sending(emulator, world):
    ctx = agent_ctx(world)
    plan = planned(ctx, "rl.toml", team="personal")
    code = approve_plan(plan.plan_id, "terminal", ctx)
    ctx.close()
    runs_before = emulator.state.create_attempts

    def sandboxed(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(read_only(world["store"], [str(CLI), *args, "--json"]), env=world["env"],
                              cwd=world["project"], capture_output=True, text=True, timeout=120)

    listed = sandboxed("list-launches")
    assert listed.returncode == 0, listed.stderr
    answer = json.loads(listed.stdout)
    assert [e["plan_id"] for e in answer["launches"]] == [plan.plan_id]
    assert "cannot be written" in answer["store_warning"]
    refused = sandboxed("dispatch-run", plan.plan_id, "--confirmation", code)
    error = json.loads(refused.stdout)
    assert error["code"] == "state_read_only", error
    assert "nothing was sent" in error["message"] and "sandbox.filesystem.allowWrite" in error["fix"]
    assert "writable_roots" in error["fix"] and "model-factory mcp-config" in error["fix"]
    assert emulator.state.create_attempts == runs_before
    # Out of the sandbox, the same code still launches it: nothing was used up.
    outside = agent_ctx(world)
    assert ok(dispatch(outside, plan.plan_id, code)).status == "created"
    outside.close()


def test_two_api_keys_personal_accounts_are_two_owners(emulator, world):
    first = agent_ctx(world)
    plan = planned(first, "rl.toml", team="personal")
    emulator.faults.commit_then_timeout("POST", "/training/runs")  # created, answer lost ...
    emulator.faults.status(503, "GET", "/rft/runs", times=None)  # ... and it cannot be looked for yet
    err(dispatch(first, plan.plan_id, approve_plan(plan.plan_id, "terminal", first)), "ambiguous_launch")
    # The same key's personal account: an unresolved launch of the same config blocks a second one.
    err(plan_run(PlanRunInput(config_path="rl.toml", team="personal"), first), "unresolved_launch")
    # Another key's personal account is another owner: nothing of theirs is unresolved.
    second = agent_ctx(world, PRIME_API_KEY=OTHER_API_KEY)
    other = planned(second, "rl.toml", team="personal")
    assert other.owner.team_id is None and other.plan_id != plan.plan_id
    assert second.store().plan(other.plan_id).account_id != first.store().plan(plan.plan_id).account_id
    first.close()
    second.close()

