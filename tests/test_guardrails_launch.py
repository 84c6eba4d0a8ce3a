"""Guardrail proofs over real HTTP that the other launch tests leave open (issue 4, "Must show").

* The ledger holds every fact of a launch (plan, approval, attempt, outcome, run id, config
  sha256, team, source ref, image, GPU, volume, price), read from the JSONL file itself.
* The team travels on every team-scoped request of plan + dispatch (reconciliation and the
  policy's concurrency count included), spelled as each endpoint expects; ``team='personal'``
  sends none even when ``PRIME_TEAM_ID`` is set.
* A dispatch process killed while its create is in flight (the emulator committed the run and
  holds the answer), raced by a second process and followed by restarts, leaves one run.
* The budget policy's ``max_concurrent_runs`` counts the owner's active runs on the platform.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _helpers import (
    EXAMPLE,
    cli_env,
    dispatch,
    emulator_env,
    example,
    make_ctx,
    mf,
    mf_json,
    ok,
    planned,
    store_bytes,
    write_policy,
)
from conftest import Recorder

from skill.emulator import DEFAULT_USER_ID, TEAM_RESEARCH_ID, EmulatorServer
from tools.core import Context
from tools.errors import ToolError, ToolFailure
from tools.guardrails import confirmation as gate
from tools.guardrails.records import PlanRecord
from tools.guardrails.store import Store
from tools.launch import PlanRunInput, StopRunInput, approve_plan, plan_run, stop_run

# -- the store -------------------------------------------------------------------------------------


def test_the_store_records_every_fact_of_a_launch_as_typed_records(emulator, recorder, tmp_path):
    ctx = make_ctx(emulator, tmp_path, env={"HF_TOKEN": "fake-hf-token-for-ledger"})
    p = planned(ctx, example(tmp_path, name="rl.toml"), team=TEAM_RESEARCH_ID, gpu_type="H100_80GB",
                volume="research-data", image_tag="v0.5.0", source_ref="main", secrets=["HF_TOKEN"])
    token = approve_plan(p.plan_id, "terminal", ctx)
    d = ok(dispatch(ctx, p.plan_id, token))

    store = ctx.store()
    plan = store.plan(p.plan_id)
    (approval,), (attempt,), (outcome,) = store.records_of([p.plan_id])
    assert isinstance(plan, PlanRecord) and plan.plan_hash == p.plan_hash == gate.plan_hash(plan.material)
    assert plan.config_sha256 == p.config_sha256 == \
        gate.config_sha256(emulator.state.run(d.run_id).config)  # the config the platform got is the one hashed
    assert (plan.action, plan.platform_url, plan.account_id) == ("launch", emulator.base_url, DEFAULT_USER_ID)
    assert (plan.team_id, plan.source_ref, plan.image_tag, plan.gpu_type, plan.gpu_count, plan.volume) == \
        (TEAM_RESEARCH_ID, "main", "v0.5.0", "H100_80GB", 2, "research-data")
    assert plan.cost.usd_per_gpu_hour == 1.8 and plan.cost.usd_high == p.cost.usd_high
    assert (plan.secret_names, plan.max_steps, plan.name, plan.fingerprint) == \
        (["HF_TOKEN"], 20, p.run_name, p.run_name.rsplit("-", 1)[1])
    assert approval.plan_hash == p.plan_hash and (approval.channel, approval.checked) == (
        "terminal", "terminal, same user")
    assert approval.owner == TEAM_RESEARCH_ID and approval.expires_at > approval.minted_at
    assert approval.token_sha256 == attempt.token_sha256 == hashlib.sha256(token.encode()).hexdigest()
    assert (attempt.plan_hash, attempt.channel, attempt.approval_id) == (p.plan_hash, "terminal", approval.approval_id)
    assert (outcome.attempt_id, outcome.outcome, outcome.run_id) == (attempt.attempt_id, "created", d.run_id)
    assert (outcome.facts.gpu_type, outcome.facts.usd_per_gpu_hour) == ("H100_80GB", 1.8)
    assert [link.run_id for link in store.run_links(d.run_id)] == [d.run_id]
    assert token.encode() not in store_bytes(tmp_path / "state")
    assert b"fake-hf-token-for-ledger" not in store_bytes(tmp_path / "state")


# -- the team on the wire --------------------------------------------------------------------------

#: Team-scoped endpoints and where each carries the team (reference/prime-api.md §2.1).
TEAM_PARAM = {
    ("GET", "/api/v1/training/available-fft-models"): ("query", "team_id"),
    ("GET", "/api/v1/training/available-gpu-types"): ("query", "team_id"),
    ("GET", "/api/v1/training/volumes"): ("query", "teamId"),
    ("GET", "/api/v1/rft/runs"): ("query", "team_id"),
    ("GET", "/api/v1/user/whoami"): ("query", "teamId"),
    ("POST", "/api/v1/training/runs/prepare"): ("body", "teamId"),
    ("POST", "/api/v1/training/runs"): ("body", "teamId"),
}
#: Requests made during plan + dispatch that are not team-scoped.
UNSCOPED = {("GET", "/api/v1/user/teams")}


def team_sent(recorder: Recorder) -> dict[tuple[str, str], list[Any]]:
    """{(method, path): [team value of each request]} for everything recorded; fails on an unknown request."""
    seen: dict[tuple[str, str], list[Any]] = {}
    for request in recorder.requests:
        key = (request.method, request.path)
        if key in UNSCOPED or (request.method == "GET" and re.fullmatch(r"/api/v1/rft/runs/[^/]+", request.path)):
            continue  # the after-create read of the new run: its id names it (GET /rft/runs/{id} takes no team)
        assert key in TEAM_PARAM, f"unclassified request during plan/dispatch: {request.method} {request.path}"
        where, name = TEAM_PARAM[key]
        value = (request.params().get(name) or [None])[0] if where == "query" else (request.json() or {}).get(name)
        seen.setdefault(key, []).append(value)
    return seen


def test_the_team_travels_on_every_team_scoped_request(emulator, recorder, tmp_path):
    """PRIME_TEAM_ID names the team; plan, policy check, create and reconciliation all carry it."""
    ctx = make_ctx(emulator, tmp_path, env={"PRIME_TEAM_ID": TEAM_RESEARCH_ID})
    write_policy(tmp_path / "home", "max_usd_per_run = 100.0\nmax_concurrent_runs = 5\n")
    # on demand (priced, so the policy can cover it); without a GPU type the team's reservation would be planned
    p = planned(ctx, example(tmp_path, name="rl.toml"), volume="research-data", gpu_type="H100_80GB")
    assert p.owner.team_id == TEAM_RESEARCH_ID and p.owner.source == "PRIME_TEAM_ID"
    emulator.faults.commit_then_timeout(mode="drop")  # the answer is lost: dispatch reconciles by listing runs
    d = ok(dispatch(ctx, p.plan_id))
    assert d.status == "reconciled" and emulator.state.run(d.run_id).placement.team_id == TEAM_RESEARCH_ID
    seen = team_sent(recorder)
    assert set(seen) >= set(TEAM_PARAM) - {("GET", "/api/v1/user/whoami")}  # every kind was exercised
    whoami = ("GET", "/api/v1/user/whoami")  # also asked once without a team: which account the key is
    assert {key: v for key, values in seen.items() for v in values
            if v != TEAM_RESEARCH_ID and not (key == whoami and v is None)} == {}
    assert len(seen[("GET", "/api/v1/rft/runs")]) >= 2  # the policy's count of active runs, the reconciliation

    # An explicit personal owner overrides PRIME_TEAM_ID: no team on any request.
    recorder.requests.clear()
    emulator.faults.clear()
    q = planned(ctx, example(tmp_path, name="rl.toml"), team="personal")
    ok(dispatch(ctx, q.plan_id))
    seen = team_sent(recorder)
    assert ("POST", "/api/v1/training/runs") in seen
    assert {key: v for key, values in seen.items() for v in values if v is not None} == {}


# -- a dispatch process killed mid-flight ----------------------------------------------------------


def cli(emulator: EmulatorServer, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = cli_env(emulator, tmp_path / "home", tmp_path / "state")
    return subprocess.Popen([sys.executable, "-m", "skill", *args, "--json"], env=env, cwd=tmp_path / "project",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    out, err = proc.communicate(timeout=60)
    assert out, err
    return proc.returncode, json.loads(out)


def test_a_dispatch_killed_in_flight_then_any_retry_leaves_one_run(emulator, tmp_path):
    ctx = make_ctx(emulator, tmp_path)
    p = planned(ctx, example(tmp_path, name="rl.toml"), team="personal")
    token = approve_plan(p.plan_id, "terminal", ctx)
    emulator.faults.commit_then_timeout(mode="delay", delay=60.0)  # the run is created; its answer is held

    first = cli(emulator, tmp_path, "dispatch-run", p.plan_id, "--confirmation", token)
    deadline = time.monotonic() + 30
    while not emulator.state.runs and time.monotonic() < deadline:
        time.sleep(0.05)
    (run_id,) = emulator.state.runs
    assert first.poll() is None  # still waiting for the answer
    assert gate.launch_state(ctx.store(), p.plan_id).status == "in_flight"

    # Another agent process retries meanwhile: it reconciles, it does not send.
    code, out = finished(cli(emulator, tmp_path, "dispatch-run", p.plan_id, "--confirmation", token))
    assert (code, out["status"], out["run_id"]) == (0, "reconciled", run_id)
    first.send_signal(signal.SIGKILL)  # the first process dies before recording an outcome
    first.wait(timeout=10)

    # Restarted agents: no token, the same token, a fresh approval; a person approving again.
    code, out = finished(cli(emulator, tmp_path, "dispatch-run", p.plan_id))
    assert (code, out["status"], out["run_id"]) == (0, "already_dispatched", run_id)
    code, out = finished(cli(emulator, tmp_path, "dispatch-run", p.plan_id, "--confirmation", token))
    assert (code, out["run_id"]) == (0, run_id)
    fresh = gate.mint(ctx.store(), p.plan_id, p.plan_hash, "terminal")
    assert ok(dispatch(ctx, p.plan_id, fresh)).run_id == run_id
    with pytest.raises(ToolFailure) as refused:
        approve_plan(p.plan_id, "terminal", ctx)
    assert refused.value.error.code == "already_dispatched"
    assert len(emulator.state.runs) == 1 and emulator.state.create_attempts == 1
    attempts = gate.launch_state(ctx.store(), p.plan_id).attempts
    assert [a.outcome for a in attempts] == ["reconciled"]


def test_a_dropped_create_answer_is_reconciled_and_never_resent(emulator, tmp_path):
    ctx = make_ctx(emulator, tmp_path)
    p = planned(ctx, example(tmp_path, name="rl.toml"), team="personal")
    token = approve_plan(p.plan_id, "terminal", ctx)
    emulator.faults.commit_then_timeout(mode="drop")  # created, then the connection closes without an answer
    first = ok(dispatch(ctx, p.plan_id, token))
    (run_id,) = emulator.state.runs
    assert (first.status, first.run_id) == ("reconciled", run_id)
    code, out = finished(cli(emulator, tmp_path, "dispatch-run", p.plan_id, "--confirmation", token))
    assert (code, out["status"], out["run_id"]) == (0, "already_dispatched", run_id)
    assert len(emulator.state.runs) == 1 and emulator.state.create_attempts == 1


# -- the policy's concurrency limit ------------------------------------------------------------------


def test_policy_max_concurrent_runs_counts_active_runs_on_the_platform(emulator, tmp_path):
    ctx = make_ctx(emulator, tmp_path)
    write_policy(tmp_path / "home", "max_usd_per_run = 100.0\nmax_concurrent_runs = 1\n")
    first = planned(ctx, example(tmp_path, name="rl.toml"), team="personal")
    run = ok(dispatch(ctx, first.plan_id))
    assert run.approval_channel == "policy" and emulator.state.run(run.run_id).status == "QUEUED"
    second = planned(ctx, example(tmp_path, name="rl.toml"), team="personal")
    denied = dispatch(ctx, second.plan_id)
    assert denied.code == "confirmation_required" and "exceeds max_concurrent_runs 1" in denied.message
    assert len(emulator.state.runs) == 1
    required = stop_run(StopRunInput(run_id=run.run_id), ctx)
    stop_plan = required.fix.split("model-factory approve ")[1].split("`")[0]
    stop_token = approve_plan(stop_plan, "terminal", ctx)
    assert ok(stop_run(StopRunInput(run_id=run.run_id, confirmation=stop_token), ctx)).status == "STOPPED"
    allowed = ok(dispatch(ctx, second.plan_id))
    assert allowed.approval_channel == "policy" and len(emulator.state.runs) == 2


def test_a_plan_the_budget_policy_covers_says_so_in_its_summary_next_step_and_json(emulator, tmp_path):
    """A person reading the plan learns that the agent may launch it now without a code (the trial's
    policy, verbatim); the same plan launches on the policy channel."""
    ctx = make_ctx(emulator, tmp_path)
    write_policy(tmp_path / "home", 'max_usd_per_run = 25.0\nmax_gpus = 8\nowners = ["personal"]\n')
    policy_file = str(tmp_path / "home" / ".config" / "model-factory" / "policy.toml")
    plan = planned(ctx, example(tmp_path, name="rl.toml"), team="personal")
    assert plan.policy_approves is True and plan.policy_path == policy_file
    assert f"the budget policy {policy_file} covers this plan" in plan.summary
    assert "without a code" in plan.summary and "max_usd_per_run $25.00" in plan.summary
    assert "may launch it now" in plan.next_step and "confirmation_required" not in plan.next_step
    run = ok(dispatch(ctx, plan.plan_id))
    assert run.approval_channel == "policy"


@pytest.mark.parametrize("policy", ["max_usd_per_run = 0.01\n", 'max_usd_per_run = 25.0\nowners = ["cteam0"]\n',
                                    "max_usd_per_run = inf\n"])
def test_a_plan_the_budget_policy_does_not_cover_asks_for_a_person(emulator, tmp_path, policy):
    ctx = make_ctx(emulator, tmp_path)
    write_policy(tmp_path / "home", policy)
    plan = planned(ctx, example(tmp_path, name="rl.toml"), team="personal")
    assert plan.policy_approves is False and plan.policy_path is None
    assert "covers this plan" not in plan.summary and "confirmation_required" in plan.next_step
    if "inf" in policy:
        assert any("max_usd_per_run: Input should be a finite number" in w for w in plan.warnings)
    assert dispatch(ctx, plan.plan_id).code == "confirmation_required"


def test_the_cli_plan_says_the_policy_covers_it_in_json_and_for_a_person(emulator, tmp_path):
    home = tmp_path / "home"
    write_policy(home, "max_usd_per_run = 25.0\n")
    cfg = example(tmp_path, name="rl.toml")
    env = cli_env(emulator, home, tmp_path / "state", COLUMNS="200")
    _, data = mf_json("plan-run", cfg, "--team", "personal", env=env, cwd=cfg.parent)
    assert data["policy_approves"] is True and data["policy_path"].endswith("policy.toml")
    run = mf("plan-run", cfg, "--team", "personal", env=env, cwd=cfg.parent)
    said = run.stdout + run.stderr
    assert run.returncode == 0 and "covers this plan" in said and "Approve it in a terminal" not in said


# -- approvals void on changes outside the config file ----------------------------------------------


@pytest.mark.parametrize("change", ["price", "env_file"])
def test_an_approval_is_void_when_a_fact_outside_the_file_changes(emulator, tmp_path, change):
    """The approval covers the platform's price and the secret names the TOML's env file forwards,
    not only the config file's bytes: either change after approval gives plan_changed, nothing sent."""
    ctx = make_ctx(emulator, tmp_path, env={"HF_TOKEN": "fake-hf-token-outside"})
    cfg = example(tmp_path, name="rl.toml")
    env_file = tmp_path / "project" / "run.env"
    env_file.write_text("WANDB_API_KEY=fake-wandb-key-outside\n")
    cfg.write_text('env_files = ["run.env"]\n' + cfg.read_text())
    p = planned(ctx, cfg, team="personal", gpu_type="H100_80GB")
    assert p.secret_names == ["WANDB_API_KEY"] and p.usd_per_gpu_hour == 1.8
    token = approve_plan(p.plan_id, "terminal", ctx)
    if change == "price":
        emulator.state.seed.gpu("H100_80GB").price_per_gpu_hour = 2.9
    else:  # one more secret would reach the run
        env_file.write_text("WANDB_API_KEY=fake-wandb-key-outside\nHF_TOKEN=fake-hf-token-file\n")
    result = dispatch(ctx, p.plan_id, token)
    assert isinstance(result, ToolError) and result.code == "plan_changed", result
    assert emulator.state.create_attempts == 0 and emulator.state.runs == {}
    # The error names what moved (from the plan material recorded in the ledger), not every possibility.
    fields = [f.path for f in result.fields]
    if change == "price":
        assert "usd_per_gpu_hour 1.8 -> 2.9" in result.message
        assert fields == ["usd_per_gpu_hour", "usd_low", "usd_expected", "usd_high"]
    else:
        assert "secret_names [WANDB_API_KEY] -> [HF_TOKEN, WANDB_API_KEY]" in result.message
        assert fields == ["secret_names"]


def test_the_store_is_per_user_outside_the_project_folder_and_configurable(emulator, tmp_path):
    (tmp_path / "home").mkdir()
    project = tmp_path / "project"
    cfg = example(tmp_path, name="rl.toml")
    default = Context(env=emulator_env(emulator), home=tmp_path / "home", cwd=project)
    p = planned(default, cfg, team="personal")
    state = tmp_path / "home" / ".local" / "state" / "model-factory"
    assert (state / "state.db").is_file() and not (project / ".model-factory").exists()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700 and stat.S_IMODE((state / "state.db").stat().st_mode) == 0o600
    # a person's shell finds the same per-user store by itself: the command names no folder
    assert f"model-factory approve {p.plan_id}`" in p.next_step and "MODEL_FACTORY_STATE_DIR" not in p.next_step
    moved = Context(env=emulator_env(emulator, MODEL_FACTORY_STATE_DIR=str(tmp_path / "elsewhere")),
                    home=tmp_path / "home", cwd=project)
    q = planned(moved, cfg, team="personal")
    assert [r.plan_id for r in Store(tmp_path / "elsewhere").plans()] == [q.plan_id]
    assert f"MODEL_FACTORY_STATE_DIR={tmp_path / 'elsewhere'} " in q.next_step
    assert f"model-factory approve {q.plan_id}`" in q.next_step
    default.close()
    moved.close()


def test_an_env_file_holding_the_launch_key_is_refused_without_echoing_it(emulator, recorder, tmp_path):
    ctx = make_ctx(emulator, tmp_path)
    cfg = example(tmp_path, name="rl.toml")
    keys = tmp_path / "project" / "keys.env"
    keys.write_text("WANDB_API_KEY=fake-wandb-key-1\nPRIME_API_KEY=fake-prime-key-in-file\n")
    for where in ("toml", "argument"):
        if where == "toml":
            cfg.write_text('env_file = "keys.env"\n' + EXAMPLE.read_text())
            result = plan_run(PlanRunInput(config_path=str(cfg), team="personal"), ctx)
        else:
            cfg.write_text(EXAMPLE.read_text())
            result = plan_run(PlanRunInput(config_path=str(cfg), team="personal", env_files=["keys.env"]), ctx)
        # The TOML's env file fails config validation (as prime train does), the argument's the secret check.
        assert isinstance(result, ToolError), result
        assert result.code == ("invalid_config" if where == "toml" else "unsupported_secret"), result
        assert "PRIME_API_KEY" in result.message and "WANDB_API_KEY" in result.message and "HF_TOKEN" in result.message
        assert "fake-prime-key-in-file" not in result.model_dump_json()
    assert recorder.requests == []  # refused before anything was sent
    assert Store(tmp_path / "state").plans() == []
