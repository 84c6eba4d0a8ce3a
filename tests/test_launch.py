"""mf_plan_run / mf_dispatch_run / mf_stop_run / mf_list_launches over real HTTP against the emulator.

Covers: the create and prepare bodies against what the real prime CLI 0.18.0 sent (the
contract cassettes), the plan's money and step facts, owner and secret refusals, the
confirmation gate with every channel and the bypass list, stop, and the ledger listing.
"""

from __future__ import annotations

import json
import os
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from _helpers import dispatch, dispatch_approved, err, example, make_ctx, ok, planned, store_bytes, write_policy

from skill.emulator import TEAM_EVALS_ID, TEAM_RESEARCH_ID, EmulatorServer
from skill.exit_codes import EXIT_CONFIRMATION, exit_code_for
from tools.errors import ToolFailure
from tools.guardrails import confirmation as gate
from tools.guardrails.records import utc_now
from tools.guardrails.store import Store
from tools.launch import (
    ApprovalRequest,
    ListLaunchesInput,
    PlanRunInput,
    StopRunInput,
    approve_plan,
    list_launches,
    plan_run,
    stop_run,
)

ROOT = Path(__file__).resolve().parents[1]
CASSETTES = ROOT / "tests" / "cassettes"

# The TOMLs prime 0.18.0 dispatched when the contract cassettes were captured (tests/cassettes/capture_cli.py).
CLI_RL_TOML = """name = "demo"
image_tag = "v0.5.0"
gpu_type = "H200_141GB"
volume = "research"
env_files = ["secrets.env"]

[model]
name = "Qwen/Qwen3-4B"

[trainer]

[orchestrator]

[inference]
"""
CLI_SFT_TOML = """name = "s"

[model]
name = "Qwen/Qwen3-0.6B"

[data]
name = "willcb/R1-reverse-wikipedia-paragraphs-v1-1000"
seq_len = 4096
"""


# -- fixtures and helpers ------------------------------------------------------------------------


@pytest.fixture
def ctx(emulator, tmp_path):
    c = make_ctx(emulator, tmp_path)
    yield c
    c.close()


def write(tmp_path: Path, name: str, text: str) -> Path:
    dest = tmp_path / "project" / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest


def cassette_bodies(name: str) -> dict[str, Any]:
    """{path: JSON body} of the requests the real CLI sent in cassette ``name``."""
    data = yaml.safe_load((CASSETTES / f"{name}.yaml").read_text())
    out = {}
    for interaction in data["interactions"]:
        request = interaction["request"]
        if request["method"] == "POST":
            out[request["uri"].split("/api/v1", 1)[1]] = json.loads(request["body"])
    return out


def runs(emulator: EmulatorServer) -> list[Any]:
    return list(emulator.state.runs.values())


# -- request bodies against the real CLI's ------------------------------------------------------


def test_rl_create_and_prepare_bodies_equal_the_cli_observed_ones(emulator, recorder, tmp_path):
    """Cassette dispatch_rl (prime 0.18.0, reference §3.5): team set, HF token by name, W&B key from
    the TOML's env file, gpu type, volume and image tag from the TOML. Same inputs here."""
    cfg = write(tmp_path, "rl.toml", CLI_RL_TOML)
    write(tmp_path, "secrets.env", "WANDB_API_KEY=fake-wandb-key\n")
    ctx = make_ctx(emulator, tmp_path, env={"PRIME_TEAM_ID": TEAM_RESEARCH_ID, "HF_TOKEN": "fake-hf-token"})
    ctx.platform().create_volume(name="research", size="1Ti", team_id=TEAM_RESEARCH_ID)
    p = planned(ctx, cfg, secrets=["HF_TOKEN"], run_kind="full")
    assert p.secret_names == ["HF_TOKEN", "WANDB_API_KEY"]
    token = approve_plan(p.plan_id, "terminal", ctx)
    result = dispatch(ctx, p.plan_id, token)

    cli = cassette_bodies("dispatch_rl")
    # Our TOML adds an [inference] table (plan_run refuses an RL config without inference GPUs,
    # as the hosted validator does); everything else is the CLI's observed input.
    expected_create = {**cli["/training/runs"], "teamId": TEAM_RESEARCH_ID,
                       "name": f"demo-{p.run_name.rsplit('-', 1)[1]}",
                       "config": {**cli["/training/runs"]["config"], "inference": {}}}
    assert recorder.bodies("POST", "/training/runs") == [expected_create]
    assert list(recorder.bodies("POST", "/training/runs")[0]) == list(cli["/training/runs"])  # key order too
    assert recorder.bodies("POST", "/training/runs/prepare") == [
        {**cli["/training/runs/prepare"], "teamId": TEAM_RESEARCH_ID}]
    # The emulator refuses this model (Qwen/Qwen3-4B is not trainable there): a 4xx is reported with its
    # field errors, values scrubbed.
    error = err(result, "invalid_request")
    assert "refused" in error.message and "Qwen/Qwen3-4B" in error.message
    assert "fake-hf-token" not in error.model_dump_json() and "fake-wandb-key" not in error.model_dump_json()
    stored = store_bytes(tmp_path / "state")
    assert stored and b"fake-hf-token" not in stored and b"fake-wandb-key" not in stored
    assert gate.launch_state(ctx.store(), p.plan_id).last_outcome == "rejected"


@pytest.mark.parametrize("source_ref, cassette", [(None, "dispatch_sft"), ("main", "dispatch_sft_ref")])
def test_sft_bodies_equal_the_cli_observed_ones(recorder, ctx, tmp_path, source_ref, cassette):
    cfg = write(tmp_path, "sft.toml", CLI_SFT_TOML)
    p = planned(ctx, cfg, team="personal", run_kind="full", source_ref=source_ref)
    assert p.mode == "sft" and p.max_steps is None and p.cost.usd_expected is None
    dispatch_approved(ctx, p.plan_id)
    cli = cassette_bodies(cassette)
    # One deliberate difference: with no GPU type given, the plan pins the type it priced (the CLI lets the
    # platform pick, which could land on a differently priced type than the one approved).
    assert p.gpu_type_source.startswith("default")
    expected = {**cli["/training/runs"], "name": p.run_name, "gpuType": p.gpu_type}
    assert p.run_name.startswith("s-mf")
    assert recorder.bodies("POST", "/training/runs") == [expected]
    assert recorder.bodies("POST", "/training/runs/prepare") == [cli["/training/runs/prepare"]]
    assert "teamId" in cli["/training/runs/prepare"] and cli["/training/runs/prepare"]["teamId"] is None


def test_sft_example_smoke_run_is_created_with_the_step_cap(emulator, recorder, ctx, tmp_path):
    cfg = example(tmp_path, "wordle/sft.toml", "sft.toml")
    cfg.write_text(cfg.read_text().replace("max_steps = 20", "max_steps = 100"))
    p = planned(ctx, cfg, team="personal")
    assert (p.config_max_steps, p.max_steps) == (100, 20) and "smoke" in p.max_steps_reason
    assert any("not a path on a volume" in w for w in p.warnings)  # hosted SFT reads datasets from a volume
    token = approve_plan(p.plan_id, "terminal", ctx)
    d = ok(dispatch(ctx, p.plan_id, token))
    body = recorder.bodies("POST", "/training/runs")[0]
    assert set(body) == {"config", "mode", "name", "gpuType"} and body["mode"] == "sft"
    assert body["config"]["max_steps"] == 20 and body["config"]["data"] == tomllib.loads(cfg.read_text())["data"]
    assert recorder.bodies("POST", "/training/runs/prepare") == [{"mode": "sft", "teamId": None}]
    run = emulator.state.run(d.run_id)
    assert (d.status, run.spec.max_steps, run.name) == ("created", 20, p.run_name)
    assert d.dashboard_url is None  # an emulator run: no link to the real dashboard, which does not have it


def test_sft_with_online_eval_is_planned_with_a_warning_and_no_local_validation(recorder, ctx, tmp_path):
    """Hosted SFT is trainer-only: the worker sets [eval]/[inference] aside and `prime train run`
    skips local validation for such a config (the platform validates it on submission); the plan
    says what happens to the blocks and does not call prepare."""
    cfg = example(tmp_path, "reverse-text/sft.toml", "sft.toml")
    plan = planned(ctx, cfg, team="personal")
    assert plan.mode == "sft" and plan.runtime.local_validation == "skipped"
    assert any("[eval], [inference] set aside" in w for w in plan.warnings)
    assert recorder.bodies("POST", "/training/runs/prepare") == []


def test_deprecated_keys_are_sent_translated_as_prime_train_does_and_the_plan_says_so(recorder, ctx, tmp_path):
    """prime 0.18.0 _hosted_config: [orchestrator] trajectory_strategy and buffer dropped,
    eval.eval_base_model sent as skip_first_step with the opposite value, top-level type dropped."""
    text = example(tmp_path, "hendrycks-sanity/rl.toml").read_text()
    text = 'type = "full_finetune"\n' + text.replace(
        "[orchestrator]\n", '[orchestrator]\ntrajectory_strategy = "interleaved"\n', 1).replace(
        "[orchestrator.eval]\n", "[orchestrator.eval]\neval_base_model = false\n", 1)
    text += "\n[orchestrator.buffer]\nonline_difficulty_filtering = true\n"
    p = planned(ctx, write(tmp_path, "deprecated.toml", text), team="personal")
    said = "\n".join(p.warnings)
    assert "prime train sends skip_first_step = true, and so do these tools" in said
    assert "orchestrator.trajectory_strategy is deprecated" in said and "[orchestrator.buffer] is deprecated" in said
    assert "type is no longer used" in said
    assert p.validation.schema_check == "snapshot" and p.validation.schema_commit.startswith("559b447")
    assert "Validated:     snapshot schema of prime-rl 559b44772e47" in p.summary
    ok(dispatch_approved(ctx, p.plan_id))
    sent = recorder.bodies("POST", "/training/runs")[-1]["config"]
    evaluation = sent["orchestrator"]["eval"]
    assert evaluation["skip_first_step"] is True and "eval_base_model" not in evaluation
    assert {"trajectory_strategy", "buffer"}.isdisjoint(sent["orchestrator"]) and "type" not in sent


def test_the_tomllib_reading_is_sent_and_the_plan_warns_that_prime_train_reads_it_otherwise(
        recorder, ctx, tmp_path):
    text = 'run.name = """reverse\ntext"""\n' + example(tmp_path, "reverse-text/rl.toml").read_text()
    p = planned(ctx, write(tmp_path, "dotted.toml", text), team="personal")
    assert any(w.startswith("run.name: the toml package 0.10 that `prime train` reads TOML with") for w in p.warnings)
    ok(dispatch_approved(ctx, p.plan_id))
    sent = recorder.bodies("POST", "/training/runs")[-1]["config"]
    assert sent["run"] == {"name": "reverse\ntext"} and "name" not in sent  # toml would have moved it to the top


def test_prepare_outcomes_are_noted_not_fatal(emulator, recorder, ctx, tmp_path):
    cfg = example(tmp_path, "reverse-text/rl.toml")
    available = planned(ctx, cfg, team="personal", image_tag="v0.5.0")
    assert available.runtime.local_validation == "available" and len(available.runtime.image_commit) == 40
    prepared = recorder.bodies("POST", "/training/runs/prepare")
    assert prepared == [{"mode": "rl", "teamId": None, "imageTag": "v0.5.0"}]
    emulator.faults.status(503, "POST", "/training/runs/prepare")
    assert planned(ctx, cfg, team="personal").runtime.local_validation == "unavailable"
    emulator.faults.status(405, "POST", "/training/runs/prepare")
    old = planned(ctx, cfg, team="personal")
    assert old.runtime.local_validation == "not_supported" and "without local validation" in old.summary
    emulator.faults.status(403, "POST", "/training/runs/prepare")
    err(plan_run(PlanRunInput(config_path=str(cfg), team="personal"), ctx), "forbidden")


# -- plan: money, steps, owner, secrets -----------------------------------------------------------


def test_plan_costs_price_times_gpus_times_assumed_hours(emulator, ctx, tmp_path):
    cfg = example(tmp_path, "reverse-text/rl.toml")
    p = planned(ctx, cfg, team="personal", seconds_per_step=30)
    catalogue = ctx.platform().list_models()
    allowed = ctx.platform().list_gpu_types().gpu_types
    priced = [g for g in catalogue.on_demand if g.gpu_type in allowed and g.available_now]
    cheapest = min(priced, key=lambda g: g.price_per_gpu_hour)
    assert (p.gpu_type, p.usd_per_gpu_hour, p.gpu_count) == (cheapest.gpu_type, cheapest.price_per_gpu_hour, 2)
    assert "cheapest" in p.gpu_type_source and p.usd_per_hour == pytest.approx(cheapest.price_per_gpu_hour * 2)
    c = p.cost
    for level in ("low", "expected", "high"):
        hours = (20 * 30 + getattr(c, f"startup_minutes_{level}") * 60) / 3600
        assert getattr(c, f"hours_{level}") == pytest.approx(hours, abs=1e-4)
        assert getattr(c, f"usd_{level}") == pytest.approx(p.usd_per_hour * hours, abs=0.01)
    assert c.usd_low < c.usd_expected < c.usd_high and c.seconds_per_step_source == "argument"
    assert f"${c.usd_expected:,.2f}" in p.summary and "assumption" in p.summary
    assert "20 (smoke run" in p.summary and p.max_steps == 20
    assert emulator.state.create_attempts == 0 and runs(emulator) == []  # planning launches nothing
    default = planned(ctx, cfg, team="personal")
    assert default.cost.seconds_per_step_source == "default" and "not platform data" in default.cost.assumptions


def test_unknown_price_and_unbounded_steps_give_unknown_totals(emulator, ctx, tmp_path):
    cfg = example(tmp_path, "reverse-text/rl.toml")
    reserved = planned(ctx, cfg, team=TEAM_RESEARCH_ID, gpu_type="A100_80GB")
    assert reserved.usd_per_gpu_hour is None and reserved.usd_per_hour is None
    assert (reserved.cost.usd_low, reserved.cost.usd_expected, reserved.cost.usd_high) == (None, None, None)
    assert reserved.cost.hours_expected is not None and "A100_80GB" in reserved.cost.unknown[0]
    assert "unknown per GPU-hour" in reserved.summary and "expected unknown" in reserved.summary

    text = cfg.read_text().replace("max_steps = 20\n", "")
    unbounded = planned(ctx, write(tmp_path, "unbounded.toml", text), team="personal", run_kind="full")
    assert unbounded.max_steps is None and unbounded.usd_per_hour is not None
    assert unbounded.cost.usd_high is None and "until stopped" in " ".join(unbounded.cost.unknown)
    smoke = planned(ctx, write(tmp_path, "unbounded.toml", text), team="personal")
    assert smoke.max_steps == 20 and smoke.cost.usd_high is not None


def test_step_cap_rules_and_where_the_cap_is_written(recorder, ctx, tmp_path):
    cfg = example(tmp_path, "wordle/rl.toml")  # max_steps = 200, 2 + 6 GPUs
    assert planned(ctx, cfg, team="personal", run_kind="full").max_steps == 200
    assert planned(ctx, cfg, team="personal").max_steps == 20
    explicit = planned(ctx, cfg, team="personal", max_steps=7)
    assert explicit.max_steps == 7 and explicit.max_steps_reason == "explicit max_steps argument"
    assert explicit.gpu_count == 8
    # trainer/orchestrator max_steps set explicitly get the cap too (no shared-vs-sub-config conflict).
    text = example(tmp_path, "reverse-text/rl.toml").read_text().replace(
        "[trainer.optim]", "[trainer]\nmax_steps = 20\n\n[trainer.optim]").replace(
        "[orchestrator]\n", "[orchestrator]\nmax_steps = 20\n", 1)
    p = planned(ctx, write(tmp_path, "sub.toml", text), team="personal", max_steps=5)
    ok(dispatch_approved(ctx, p.plan_id))
    sent = recorder.bodies("POST", "/training/runs")[-1]["config"]
    assert (sent["max_steps"], sent["trainer"]["max_steps"], sent["orchestrator"]["max_steps"]) == (5, 5, 5)
    assert tomllib.loads(text)["trainer"]["max_steps"] == 20  # the user's file is untouched


def test_owner_ambiguous_stops_and_team_override_is_shown(emulator, ctx, tmp_path):
    cfg = example(tmp_path, "reverse-text/rl.toml")
    error = err(plan_run(PlanRunInput(config_path=str(cfg)), ctx), "owner_ambiguous")
    assert TEAM_RESEARCH_ID in error.message
    # the fix names the same call with each owner to choose from, quoted in the text
    assert [(c.tool, c.arguments) for c in error.next_calls] == [
        ("mf_plan_run", {"config_path": str(cfg), "team": team}) for team in ("personal", TEAM_RESEARCH_ID,
                                                                               TEAM_EVALS_ID)]
    assert all(str(c) in error.fix for c in error.next_calls)
    assert Store(tmp_path / "state").plans() == []

    prime = tmp_path / "home" / ".prime"
    prime.mkdir(parents=True)
    (prime / "config.json").write_text(json.dumps({"team_id": TEAM_EVALS_ID}))
    overridden = make_ctx(emulator, tmp_path, env={"PRIME_TEAM_ID": TEAM_RESEARCH_ID})
    p = planned(overridden, cfg)
    assert p.owner.team_id == TEAM_RESEARCH_ID and p.owner.source == "PRIME_TEAM_ID"
    assert TEAM_EVALS_ID in p.owner.note and p.owner.note in p.summary and "Emulator Research" in p.summary


def test_secret_names_and_values_are_refused(emulator, tmp_path):
    fake_hf = "hf_FAKEcanary" + "0" * 28
    ctx = make_ctx(emulator, tmp_path, env={"HF_TOKEN": fake_hf})
    cfg = example(tmp_path, "reverse-text/rl.toml")
    unsupported = err(plan_run(PlanRunInput(config_path=str(cfg), team="personal", secrets=["OPENAI_API_KEY"]), ctx),
                      "unsupported_secret")
    assert "WANDB_API_KEY" in unsupported.message and "HF_TOKEN" in unsupported.message
    launch_key = err(plan_run(PlanRunInput(config_path=str(cfg), team="personal", secrets=["PRIME_API_KEY"]), ctx),
                     "unsupported_secret")
    assert "never forwarded" in launch_key.message
    for bad in ({"secrets": [f"HF_TOKEN={fake_hf}"]}, {"name": fake_hf}, {"secrets": [fake_hf]}):
        error = err(plan_run(PlanRunInput(config_path=str(cfg), team="personal", **bad), ctx), "secret_in_input")
        assert fake_hf not in error.model_dump_json()
    in_toml = write(tmp_path, "leaky.toml", cfg.read_text() + '\n[env_vars]\nHF_TOKEN = '
                                                              '"hf_FAKEcanary00000000000000000000000000001"\n')
    error = err(plan_run(PlanRunInput(config_path=str(in_toml), team="personal"), ctx), "secret_in_input")
    assert "env_vars.HF_TOKEN" in error.message and "FAKEcanary" not in error.model_dump_json()
    named = write(tmp_path, "named.toml", cfg.read_text() + '\n[monitors.prime]\napi_key = '
                                                            '"fake-canary-literal-value"\n')
    error = err(plan_run(PlanRunInput(config_path=str(named), team="personal"), ctx), "secret_in_input")
    assert "fake-canary-literal-value" not in error.model_dump_json()
    err(plan_run(PlanRunInput(config_path=str(cfg), team="personal", secrets=["WANDB_API_KEY"]), ctx), "secret_not_set")
    write(tmp_path, "other.env", "OPENAI_API_KEY=fake-openai-value-123\n")
    error = err(plan_run(PlanRunInput(config_path=str(cfg), team="personal", env_files=["other.env"]), ctx),
                "unsupported_secret")
    assert "OPENAI_API_KEY" in error.message and "fake-openai-value-123" not in error.model_dump_json()
    assert Store(tmp_path / "state").plans() == []


def test_plan_input_errors(emulator, ctx, tmp_path):
    err(plan_run(PlanRunInput(config_path=str(tmp_path / "missing.toml"), team="personal"), ctx), "config_not_found")
    bad = write(tmp_path, "bad.toml", "x = [")
    err(plan_run(PlanRunInput(config_path=str(bad), team="personal"), ctx), "invalid_toml")
    cfg = example(tmp_path, "reverse-text/rl.toml")
    missing = err(plan_run(PlanRunInput(config_path=str(cfg), team=TEAM_RESEARCH_ID, volume="nope"), ctx),
                  "volume_not_found")
    assert "research-data" in missing.message and "prime volumes create" in missing.fix
    assert planned(ctx, cfg, team=TEAM_RESEARCH_ID, volume="research-data").volume == "research-data"
    err(plan_run(PlanRunInput(config_path=str(cfg), team="personal", gpu_type="TPU_v9"), ctx), "bad_arguments")
    err(plan_run(PlanRunInput(config_path=str(cfg), team="personal", source_ref="refs/pull/1"), ctx), "bad_arguments")


# -- the confirmation gate -----------------------------------------------------------------------


def test_no_confirmation_and_no_channel_is_confirmation_required(emulator, ctx, tmp_path):
    p = planned(ctx, example(tmp_path, "reverse-text/rl.toml"), team="personal")
    error = err(dispatch(ctx, p.plan_id), "confirmation_required")
    assert f"model-factory approve {p.plan_id}" in error.fix and "confirmation" in error.fix
    # The command names the state folder (the person's terminal is seldom in the agent's folder).
    assert f"MODEL_FACTORY_STATE_DIR={(tmp_path / 'state').resolve()} " in error.fix
    assert f"model-factory approve {p.plan_id}`" in p.next_step
    assert exit_code_for(error) == EXIT_CONFIRMATION
    assert emulator.state.create_attempts == 0


def test_host_approver_yes_and_no(emulator, tmp_path):
    asked: list[ApprovalRequest] = []
    answer = {"value": False}

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return answer["value"]

    ctx = make_ctx(emulator, tmp_path, approver=approver)
    p = planned(ctx, example(tmp_path, "reverse-text/rl.toml"), team="personal")
    refused = err(dispatch(ctx, p.plan_id), "approval_refused")
    assert exit_code_for(refused) == EXIT_CONFIRMATION and emulator.state.create_attempts == 0
    assert asked[0].summary == p.summary and asked[0].plan_hash == p.plan_hash and asked[0].action == "launch"
    answer["value"] = True
    d = ok(dispatch(ctx, p.plan_id))
    assert (d.status, d.approval_channel, len(runs(emulator))) == ("created", "host_callback", 1)
    assert d.estimated_usd_per_hour == pytest.approx(p.usd_per_hour)


def test_budget_policy_allows_and_denies(emulator, tmp_path):
    asked: list[ApprovalRequest] = []
    ctx = make_ctx(emulator, tmp_path)
    cfg = example(tmp_path, "reverse-text/rl.toml")
    write_policy(tmp_path / "home", "max_usd_per_run = 0.05\n")
    p = planned(ctx, cfg, team="personal")
    denied = err(dispatch(ctx, p.plan_id), "confirmation_required")
    assert "exceeds max_usd_per_run" in denied.message
    write_policy(tmp_path / "home", 'max_usd_per_run = 50.0\nallowed_gpu_types = ["H100_80GB"]\nmax_concurrent_runs = '
                                    '3\n')
    d = ok(dispatch(ctx, p.plan_id))
    assert d.approval_channel == "policy" and len(runs(emulator)) == 1
    # A policy the agent could write (inside the project folder) authorizes nothing; the host is asked instead.
    inside = write(tmp_path, "policy.toml", "max_usd_per_run = 1000.0\n")
    inside.chmod(0o600)
    agent_ctx = make_ctx(emulator, tmp_path, env={"MODEL_FACTORY_POLICY": str(inside)},
                         approver=lambda r: asked.append(r) or False)
    q = planned(agent_ctx, cfg, team="personal")
    err(dispatch(agent_ctx, q.plan_id), "approval_refused")
    assert len(asked) == 1 and len(runs(emulator)) == 1


def test_policy_in_the_env_home_is_used_and_a_named_missing_policy_is_reported(emulator, tmp_path):
    """The policy comes from the same home as the prime config: $HOME of the context's env when the
    context names no home. A MODEL_FACTORY_POLICY that names no file is reported, not ignored."""
    home = tmp_path / "home"
    write_policy(home, "max_usd_per_run = 50.0\n")
    ctx = make_ctx(emulator, tmp_path, env={"HOME": str(home)})
    ctx.home = None
    p = planned(ctx, example(tmp_path, "reverse-text/rl.toml"), team="personal")
    assert not any("policy" in w.lower() for w in p.warnings)
    assert ok(dispatch(ctx, p.plan_id)).approval_channel == "policy"

    missing = tmp_path / "elsewhere" / "policy.toml"
    named = make_ctx(emulator, tmp_path, env={"HOME": str(home), "MODEL_FACTORY_POLICY": str(missing)})
    q = planned(named, example(tmp_path, "reverse-text/rl.toml"), team="personal")
    warning = next(w for w in q.warnings if "MODEL_FACTORY_POLICY" in w)
    assert str(missing) in warning and "no file" in warning and warning in q.summary
    required = err(dispatch(named, q.plan_id), "confirmation_required")
    assert f"MODEL_FACTORY_POLICY names {missing}" in required.message
    assert len(runs(emulator)) == 1


def test_huge_step_caps_and_costs_are_flagged(emulator, ctx, tmp_path):
    """Within the accepted range (up to 10,000,000 steps), a plan whose figures look like a typo says so
    (warnings and summary)."""
    cfg = example(tmp_path, "reverse-text/rl.toml")
    normal = planned(ctx, cfg, team="personal")
    assert not any("double-check" in w for w in normal.warnings)
    absurd = planned(ctx, cfg, team="personal", max_steps=10_000_000)
    assert absurd.cost.usd_high > 1_000_000
    cost_warning = next(w for w in absurd.warnings if "high cost estimate" in w)
    assert f"${absurd.cost.usd_high:,.2f}" in cost_warning and "double-check" in cost_warning
    assert any(w.startswith("The step cap is 10,000,000 steps") and "double-check" in w for w in absurd.warnings)
    assert cost_warning in absurd.summary
    costly = planned(ctx, cfg, team="personal", max_steps=50_000)  # within the step threshold, over $1,000
    assert costly.cost.usd_high > 1000
    flagged = [w for w in costly.warnings if "double-check" in w]
    assert len(flagged) == 1 and flagged[0].startswith("The high cost estimate is $")


def test_bypasses_are_refused(emulator, ctx, tmp_path):
    cfg = example(tmp_path, "reverse-text/rl.toml")
    a = planned(ctx, cfg, team="personal")
    b = planned(ctx, cfg, team="personal")
    token_a = approve_plan(a.plan_id, "terminal", ctx)
    prefix = f"mfc_{b.plan_id}_"
    err(dispatch(ctx, b.plan_id, token_a), "confirmation_invalid")  # another plan's token
    err(dispatch(ctx, b.plan_id, prefix + "0" * 40), "confirmation_invalid")  # forged
    token_b = approve_plan(b.plan_id, "terminal", ctx)
    altered = token_b[:-1] + ("0" if token_b[-1] != "0" else "1")
    err(dispatch(ctx, b.plan_id, altered), "confirmation_invalid")
    ledger = ctx.store()
    expired = gate.mint(ledger, b.plan_id, b.plan_hash, "terminal", 60, now=utc_now() - timedelta(minutes=5))
    err(dispatch(ctx, b.plan_id, expired), "confirmation_expired")
    assert emulator.state.create_attempts == 0

    # Reused: a refused create spends its token; the same token cannot launch again.
    emulator.faults.status(400, "POST", "/training/runs", detail="Injected refusal")
    err(dispatch(ctx, a.plan_id, token_a), "invalid_request")
    err(dispatch(ctx, a.plan_id, token_a), "confirmation_used")
    assert emulator.state.create_attempts == 0 and runs(emulator) == []

    # Config edited after approval (a comment only): the approval no longer covers it, and the error says
    # that the file's bytes moved while the hosted config did not.
    cfg.write_text(cfg.read_text() + "\n# edited after approval\n")
    changed = err(dispatch(ctx, b.plan_id, token_b), "plan_changed")
    assert [f.path for f in changed.fields] == ["file_sha256"]
    assert f"file_sha256 {b.file_sha256[:12]} -> " in changed.message
    with pytest.raises(ToolFailure) as refused:
        approve_plan(b.plan_id, "terminal", ctx)
    assert refused.value.error.code == "plan_changed"
    assert runs(emulator) == []


def test_approval_for_another_team_is_refused(emulator, tmp_path):
    cfg = example(tmp_path, "reverse-text/rl.toml")
    team_a = make_ctx(emulator, tmp_path, env={"PRIME_TEAM_ID": TEAM_RESEARCH_ID})
    p = planned(team_a, cfg)
    token = approve_plan(p.plan_id, "terminal", team_a)
    team_b = make_ctx(emulator, tmp_path, env={"PRIME_TEAM_ID": TEAM_EVALS_ID})
    changed = err(dispatch(team_b, p.plan_id, token), "plan_changed")
    assert f"team_id {TEAM_RESEARCH_ID} -> {TEAM_EVALS_ID}" in changed.message
    assert "team_id" in [f.path for f in changed.fields] and "config_sha256" not in changed.message
    assert runs(emulator) == [] and emulator.state.create_attempts == 0
    assert ok(dispatch(team_a, p.plan_id, token)).status == "created"
    assert emulator.state.run(runs(emulator)[0].id).placement.team_id == TEAM_RESEARCH_ID


# -- stop and the ledger listing ------------------------------------------------------------------


def test_stop_is_gated_then_stops(emulator, ctx, tmp_path):
    p = planned(ctx, example(tmp_path, "reverse-text/rl.toml"), team="personal")
    d = ok(dispatch(ctx, p.plan_id, approve_plan(p.plan_id, "terminal", ctx)))
    emulator.state.advance(300)
    assert emulator.state.run(d.run_id).status == "RUNNING"

    required = err(stop_run(StopRunInput(run_id=d.run_id), ctx), "confirmation_required")
    stop_plan = required.fix.split("model-factory approve ")[1].split("`")[0]
    assert stop_plan.startswith("stop_") and emulator.state.run(d.run_id).status == "RUNNING"
    assert d.run_id in required.message and "summary above" in required.fix  # the agent can show what is asked
    launch_token = gate.mint(ctx.store(), p.plan_id, p.plan_hash, "terminal")  # a real token, wrong plan
    err(stop_run(StopRunInput(run_id=d.run_id, confirmation=launch_token), ctx), "confirmation_invalid")
    token = approve_plan(stop_plan, "terminal", ctx)
    stopped = ok(stop_run(StopRunInput(run_id=d.run_id, confirmation=token, timeout_seconds=10), ctx))
    assert (stopped.status, stopped.outcome, stopped.approval_channel) == ("STOPPED", "stopped", "terminal")
    assert emulator.state.run(d.run_id).status == "STOPPED"
    again = ok(stop_run(StopRunInput(run_id=d.run_id, confirmation=token), ctx))
    assert again.outcome == "already_terminal"


def test_stop_with_host_approver_and_refusal(emulator, tmp_path):
    answers: list[bool] = [False, True]
    ctx = make_ctx(emulator, tmp_path, approver=lambda request: answers.pop(0) if request.action == "stop" else True)
    p = planned(ctx, example(tmp_path, "reverse-text/rl.toml"), team="personal")
    d = ok(dispatch(ctx, p.plan_id))
    err(stop_run(StopRunInput(run_id=d.run_id), ctx), "approval_refused")
    assert emulator.state.run(d.run_id).status == "QUEUED"
    assert ok(stop_run(StopRunInput(run_id=d.run_id), ctx)).status == "STOPPED"


def test_list_launches_shows_the_store_scrubbed(emulator, tmp_path):
    fake_wandb = "fake-wandb-canary-key-0001"
    ctx = make_ctx(emulator, tmp_path, env={"WANDB_API_KEY": fake_wandb}, approver=lambda r: True)
    p = planned(ctx, example(tmp_path, "reverse-text/rl.toml"), team="personal", secrets=["WANDB_API_KEY"])
    d = ok(dispatch(ctx, p.plan_id))
    q = planned(ctx, example(tmp_path, "reverse-text/rl.toml"), team="personal")
    listed = ok(list_launches(ListLaunchesInput(limit=10), ctx))
    first, second = listed.launches
    assert (first.plan_id, first.status, first.outcome) == (q.plan_id, "planned", None)
    assert (second.plan_id, second.status, second.outcome, second.run_id) == \
        (p.plan_id, "dispatched", "created", d.run_id)
    assert (second.approval_channel, second.attempts, second.gpu_type) == ("host_callback", 1, p.gpu_type)
    assert second.usd_per_gpu_hour == p.usd_per_gpu_hour and second.config_sha256 == p.config_sha256
    assert emulator.state.run(d.run_id).wandb_api_key == fake_wandb  # the value reached the run...
    assert fake_wandb not in listed.model_dump_json()  # ...and no output or file holds it
    assert fake_wandb.encode() not in store_bytes(tmp_path / "state")
    # The per-run token of the create answer (tokenValue, emulator prefix pit_run_fake_) is never kept or shown.
    assert "pit_run_fake_" not in d.model_dump_json() and b"pit_run_fake_" not in store_bytes(tmp_path / "state")
    assert ok(list_launches(ListLaunchesInput(limit=1), ctx)).launches[0].plan_id == q.plan_id
    assert os.stat(tmp_path / "state" / "state.db").st_mode & 0o077 == 0


def test_skipped_env_file_lines_are_explained(emulator, ctx, tmp_path):
    """A shell-style `export HF_TOKEN=...` line is skipped by the CLI's env-file parser (invalid key):
    the plan says so instead of only reporting the name as unset."""
    cfg = example(tmp_path, "reverse-text/rl.toml")
    env_file = write(tmp_path, "hf.env", "export HF_TOKEN=fake-hf-token-value\n")
    error = err(plan_run(PlanRunInput(config_path=str(cfg), team="personal", secrets=["HF_TOKEN"],
                                      env_files=[str(env_file)]), ctx), "secret_not_set")
    assert "skipped" in error.message and "line 1 in" in error.message and "hf.env" in error.message
    assert "fake-hf-token-value" not in error.model_dump_json()
