"""The GPUs a plan prices are the GPUs the platform bills: one rule (prime-rl's ``[deployment]``
classes: ``tools.configs._facts.gpu_count`` on the plan side, ``skill.emulator.configs.gpu_count``
on the platform side), checked per run kind by planning, approving and launching on the emulator
over real HTTP, then reading what the platform reports for the run (``gpuCount``,
``pricePerGpuHour``, ``estimatedCostPerHour``) and what it bills (``/billing/runs/{id}/usage``).

Billing facts (docs/hosted-training/billing, shared/reference/platform-docs.md): per GPU-hour,
prorated to the second; queue and image pull are not billed; the rate is fixed at dispatch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit
from _helpers import approved_launch, call, err, ok, planned

from skill.emulator import TEAM_RESEARCH_ID
from skill.emulator import configs as emulated
from tools.configs import EXAMPLES_DIR, read_config, validate_read
from tools.core import Context

QUEUE, STARTUP, STEP = 60.0, 90.0, 30.0


def _sft_without_online_eval(ctx: Context, tmp_path: Path) -> Path:
    """The issue's repro: ``prepare-config basic/reverse-text/sft sft.toml --num-train-gpus 1``: the copy
    drops the online-eval blocks; ``num_infer_gpus`` stays at prime-rl's default of 1, unused without
    ``[inference]`` (the emulator billed it)."""
    dest = tmp_path / "project" / "sft.toml"
    ok(call(ctx, "mf_prepare_config", example="basic/reverse-text/sft", dest=str(dest), num_train_gpus=1))
    doc = tomlkit.parse(dest.read_text())
    assert "inference" not in doc and doc["deployment"].get("num_infer_gpus", 1) == 1  # the case that billed 2
    return dest


KINDS = {
    # run kind: (config, extra plan arguments, GPUs the schema counts)
    "rl single node (wordle, 2 train + 6 inference)": ("basic/wordle/rl.toml", {}, 8),
    "sft with online eval (reverse-text, 1 + 1)": ("basic/reverse-text/sft.toml", {}, 2),
    "sft without online eval (wordle, no [inference])": ("basic/wordle/sft.toml", {}, 1),
    "rl multi node (qwen3-30b math, 2 + 2 nodes of 8)": ("advanced/qwen3-30b-a3b/math.toml",
                                                         {"gpu_type": "H200_141GB"}, 32),
}


def _billed(ctx: Context, emulator, run_id: str, plan) -> dict:
    """What the platform reports and bills for run ``run_id`` after 10 billed minutes."""
    run = ctx.platform().get_run(run_id)
    emulator.state.advance(QUEUE + STARTUP + 600)
    usage = ctx.platform().get_usage(run_id)
    return {"gpus": run.gpu_count, "usage_usd": usage.total_cost_usd}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_run_kind_is_billed_the_gpus_and_rate_its_plan_priced(kind, frozen_ctx, emulator):
    rel, extra, schema_gpus = KINDS[kind]
    plan, launched = approved_launch(frozen_ctx, EXAMPLES_DIR / rel, max_steps=200, **extra)
    assert plan.gpu_count == schema_gpus
    run = frozen_ctx.platform().get_run(launched.run_id)
    assert run.gpu_count == plan.gpu_count, f"billed {run.gpu_count} GPUs, planned {plan.gpu_count}"
    assert launched.usd_per_gpu_hour == plan.usd_per_gpu_hour
    assert launched.estimated_usd_per_hour == plan.cost.usd_per_hour == round(plan.usd_per_gpu_hour * schema_gpus, 4)
    emulator.state.advance(QUEUE + STARTUP + 600)  # queue and start-up (image pull) are not billed
    usage = frozen_ctx.platform().get_usage(launched.run_id)
    assert usage.total_cost_usd == pytest.approx(600 / 3600 * plan.cost.usd_per_hour, abs=1e-4)


def test_the_sft_repro_plans_and_bills_one_gpu(frozen_ctx, emulator, tmp_path):
    path = _sft_without_online_eval(frozen_ctx, tmp_path)
    plan, launched = approved_launch(frozen_ctx, path, max_steps=5)
    run = frozen_ctx.platform().get_run(launched.run_id)
    assert (plan.gpu_count, run.gpu_count) == (1, 1)
    assert launched.estimated_usd_per_hour == plan.cost.usd_per_hour == plan.usd_per_gpu_hour


def test_plan_and_emulator_count_the_same_gpus_for_every_bundled_example(frozen_ctx):
    """The two sides of the wire keep one rule: every bundled example, as the plan counts it and as
    the emulator bills it (prime-rl's deployment classes; the tools never import the emulator)."""
    checked = 0
    for path in sorted(EXAMPLES_DIR.rglob("*.toml")):
        data, raw = read_config(path)
        report = validate_read(path, data, frozen_ctx)
        if report.gpu_count is None:
            continue
        assert emulated.gpu_count(raw, sft=report.mode == "sft") == report.gpu_count, path
        checked += 1
    assert checked >= 8


# -- checked after every create ----------------------------------------------------------------------


def test_a_launch_that_matches_its_plan_has_no_alert(frozen_ctx, emulator):
    plan, launched = approved_launch(frozen_ctx, EXAMPLES_DIR / "basic/wordle/sft.toml", max_steps=5)
    assert launched.alerts == [] and not launched.message.startswith("ALERT")
    assert ok(call(frozen_ctx, "mf_check_progress", run_id=launched.run_id)).alerts == []


def test_a_team_run_the_platform_bills_to_the_personal_account_is_an_alert_everywhere(frozen_ctx, emulator):
    emulator.faults.rewrite("POST", "/training/runs", patch={"teamId": None})  # a rewriting proxy drops the team
    plan, launched = approved_launch(frozen_ctx, EXAMPLES_DIR / "basic/wordle/sft.toml", max_steps=5,
                                     team=TEAM_RESEARCH_ID, gpu_type="H100_80GB")
    run = frozen_ctx.platform().get_run(launched.run_id)
    assert run.team_id is None  # the platform really put it on the personal account
    wanted = f"billed to the personal account, you approved the team Emulator Research ({TEAM_RESEARCH_ID})"
    assert [a for a in launched.alerts if "personal account" in a] == [wanted]
    assert launched.message.startswith(f"ALERT: the platform's run {launched.run_id} differs from the approved plan")
    assert [c.tool for c in launched.next_calls[:2]] == ["mf_pause_run", "mf_stop_run"]
    emulator.state.advance(QUEUE + STARTUP + 2 * STEP)
    checked = ok(call(frozen_ctx, "mf_check_progress", run_id=launched.run_id))  # keeps saying it
    assert wanted in checked.alerts and checked.evidence[0].startswith("ALERT: ") and wanted in checked.evidence[0]
    assert [c.tool for c in checked.next_calls[:2]] == ["mf_pause_run", "mf_stop_run"]
    report = ok(call(frozen_ctx, "mf_run_report", run_id=launched.run_id))
    assert wanted in report.alerts and f"- ALERT: the platform's run {launched.run_id}" in report.markdown
    assert report.markdown.count("ALERT") == 1


# -- the GPU the platform would choose ---------------------------------------------------------------


def test_without_a_gpu_type_a_team_with_a_reservation_is_planned_on_it_as_the_platform_places_it(frozen_ctx,
                                                                                                  emulator):
    plan, launched = approved_launch(frozen_ctx, EXAMPLES_DIR / "basic/reverse-text/rl.toml", team=TEAM_RESEARCH_ID)
    assert plan.gpu_type == "A100_80GB" and "reserved capacity, which the platform uses first" in plan.gpu_type_source
    assert plan.usd_per_gpu_hour is None and "reserved capacity" in plan.cost.unknown[0]
    assert any("on demand it could run on H100_80GB" in w for w in plan.warnings)
    assert emulator.state.run(launched.run_id).placement.gpu_type == "A100_80GB" and launched.alerts == []
    personal = planned(frozen_ctx, EXAMPLES_DIR / "basic/reverse-text/rl.toml", team="personal")
    assert personal.gpu_type == "H100_80GB" and "cheapest on-demand" in personal.gpu_type_source  # no reservation


def test_a_volume_whose_cluster_does_not_serve_the_gpu_type_is_a_plan_error_naming_the_types_that_fit(frozen_ctx,
                                                                                                   emulator):
    config = EXAMPLES_DIR / "basic/reverse-text/rl.toml"
    error = err(call(frozen_ctx, "mf_plan_run", config_path=str(config), team=TEAM_RESEARCH_ID,
                     volume="research-data", gpu_type="H200_141GB"), "bad_arguments")
    assert "Volume research-data is on cluster on-demand-h100, which serves H100_80GB, not H200_141GB" in error.message
    assert error.next_calls[0].arguments["gpu_type"] == "H100_80GB"
    fitted = planned(frozen_ctx, config, team=TEAM_RESEARCH_ID, volume="research-data")  # no GPU type: one that fits
    assert fitted.gpu_type == "H100_80GB" and "that volume research-data's cluster serves" in fitted.gpu_type_source
