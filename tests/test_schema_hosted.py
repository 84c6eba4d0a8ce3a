"""The hosted pipeline every back-end shares: what prime train validate 0.18.0 does around the schema.

The CLI drops its own keys and translates deprecated ``[orchestrator]`` keys; its schema worker
refuses ``[k8s]``, sets environment sources (RL) or the online-eval blocks (SFT) aside, adds
``slurm = {}`` for multi-node, validates, applies the hosted rejections and checks the
set-aside blocks; the platform then checks the sources when the run starts. Checked here
through mf_validate_config with the snapshot (no prime-rl needed);
tests/test_schema_conformance.py checks the same pipeline against prime's own code.
"""

from __future__ import annotations

import copy

from _schema_env import example, first_error, validate_table

from tools.configs import check_snapshot_schema, hosted_config
from tools.core import Context


def by_rule(report, rule: str) -> list:
    return [i for i in [*report.errors, *report.warnings] if i.rule == rule]


# --- the CLI ---------------------------------------------------------------------------------


def test_eval_base_model_is_translated_to_skip_first_step_with_the_opposite_value(schema_ctx: Context) -> None:
    config = example("basic/hendrycks-sanity/rl")
    config["orchestrator"]["eval"]["eval_base_model"] = False
    report = validate_table(config, schema_ctx)
    assert report.valid
    [warning] = by_rule(report, "deprecated_key")
    assert warning.path == "orchestrator.eval.eval_base_model" and warning.line is not None
    assert "prime train sends skip_first_step = true, and so do these tools" in warning.message
    assert "opposite meaning" in warning.message and warning.fix
    sent, _ = hosted_config(config)
    assert sent["orchestrator"]["eval"]["skip_first_step"] is True
    assert "eval_base_model" not in sent["orchestrator"]["eval"]


def test_when_skip_first_step_is_also_set_it_wins_and_eval_base_model_is_dropped(schema_ctx: Context) -> None:
    config = example("basic/hendrycks-sanity/rl")
    config["orchestrator"]["eval"] |= {"eval_base_model": True, "skip_first_step": True}
    report = validate_table(config, schema_ctx)
    [warning] = by_rule(report, "deprecated_key")
    assert report.valid and "the new key wins (skip_first_step = true is sent)" in warning.message
    sent = hosted_config(config)[0]["orchestrator"]["eval"]
    assert sent["skip_first_step"] is True and "eval_base_model" not in sent


def test_orchestrator_buffer_and_trajectory_strategy_are_dropped_with_warnings(schema_ctx: Context) -> None:
    config = example("basic/wordle/rl")
    config["orchestrator"] |= {"buffer": {"online_difficulty_filtering": True}, "trajectory_strategy": "interleaved"}
    report = validate_table(config, schema_ctx)
    assert report.valid
    assert [w.path for w in by_rule(report, "deprecated_key")] == ["orchestrator.trajectory_strategy",
                                                                   "orchestrator.buffer"]
    assert {"buffer", "trajectory_strategy"}.isdisjoint(hosted_config(config)[0]["orchestrator"])


def test_a_top_level_buffer_is_not_translated_and_the_schema_refuses_it_naming_the_replacement(
        schema_ctx: Context) -> None:
    report = validate_table(example("basic/reverse-text/rl") | {"buffer": {"online_difficulty_filtering": True}},
                            schema_ctx)
    assert first_error(report) == ("buffer", "schema:additionalProperties")
    assert "curriculum" in report.errors[0].message and report.errors[0].fix.startswith("Replace buffer")


def test_eval_base_model_outside_orchestrator_eval_is_refused_with_its_opposite_meaning(schema_ctx: Context) -> None:
    config = example("basic/hendrycks-sanity/rl")
    config["orchestrator"]["eval_base_model"] = True
    report = validate_table(config, schema_ctx)
    assert first_error(report) == ("orchestrator.eval_base_model", "schema:additionalProperties")
    assert "OPPOSITE meaning" in report.errors[0].message and "skip_first_step" in report.errors[0].fix


def test_keys_prime_train_reads_itself_are_not_validated_and_type_gets_a_warning(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl") | {"image_tag": "v0.5.0", "gpu_type": "H200_141GB", "volume": "research",
                                                 "volume_size": "2Ti", "source_ref": "main", "name": "demo",
                                                 "type": "full_finetune"}
    report = validate_table(config, schema_ctx)
    assert report.valid and [w.path for w in by_rule(report, "cli_type_key")] == ["type"]


# --- the worker ------------------------------------------------------------------------------


def test_a_k8s_table_is_refused_and_an_empty_one_is_dropped(schema_ctx: Context) -> None:
    config = example("basic/wiki-search/rl")
    assert first_error(validate_table(config | {"k8s": {"namespace": "research"}}, schema_ctx)) == ("k8s", "k8s")
    assert validate_table(config | {"k8s": {}}, schema_ctx, name="empty.toml").valid


def test_multi_node_without_slurm_gets_an_empty_slurm_table(schema_ctx: Context) -> None:
    config = example("advanced/qwen3-30b-a3b/math")
    del config["slurm"]
    report = validate_table(config, schema_ctx)
    assert report.valid and any("slurm = {}" in n for n in report.notes)


def test_hosted_rl_rejects_clean_and_runs_without_inference_gpus_but_sft_does_not(schema_ctx: Context) -> None:
    assert first_error(validate_table(example("basic/reverse-text/rl") | {"clean": True}, schema_ctx)) == (
        "clean", "clean")
    assert validate_table(example("basic/wordle/sft") | {"clean": True}, schema_ctx, name="sft.toml").valid
    config = example("basic/reverse-text/rl")
    del config["inference"]
    assert first_error(validate_table(config, schema_ctx, name="b.toml"))[1] == "rl_needs_inference"
    config["trainer"]["data"] = {"fake": {}}
    assert validate_table(config, schema_ctx, name="c.toml").valid


def test_hosted_rejections_come_after_schema_errors(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl") | {"clean": True}
    config["orchestrator"]["batch_size"] = 0
    assert first_error(validate_table(config, schema_ctx))[0] == "orchestrator.batch_size"


def test_errors_inside_a_set_aside_block_count_but_its_own_validators_do_not(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/sft")
    config["eval"]["interval"] = 0
    assert first_error(validate_table(config, schema_ctx))[0] == "eval.interval"
    without_sources = example("basic/reverse-text/sft")
    del without_sources["eval"]["source"]  # EvalConfig.validate_non_empty_sources: needs the sources set aside
    report = validate_table(without_sources, schema_ctx, name="b.toml")
    # prime train validate lets it pass; the platform's own check on submission (SFTConfig, blocks kept) does not
    assert [e.path for e in report.errors] == ["eval"] and all(
        "checked when the run is submitted" in e.message for e in report.errors)


def test_sft_online_eval_blocks_are_valid_with_a_warning_that_says_what_happens_to_them(schema_ctx: Context) -> None:
    report = validate_table(example("basic/reverse-text/sft"), schema_ctx)
    assert report.valid
    [warning] = by_rule(report, "sft_online_eval")
    assert "[eval], [inference] set aside" in warning.message and "trainer-only" in warning.message
    assert warning.path == "eval" and warning.line is not None and "mf_prepare_config" in warning.fix


def test_rl_environment_sources_are_checked_as_the_platform_does_when_the_run_starts(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    config["orchestrator"]["train"]["source"][0]["ratio"] = 0
    report = validate_table(config, schema_ctx)
    assert first_error(report)[0] == "orchestrator.train.source[0].ratio"
    assert "checked when the run starts" in report.errors[0].message
    assert check_snapshot_schema(config, "rl", run_start=False).valid  # what prime train validate alone says


def test_checking_leaves_the_callers_config_unchanged() -> None:
    config = example("basic/hendrycks-sanity/rl")
    config["orchestrator"]["eval"]["eval_base_model"] = False
    config["k8s"] = {}
    before = copy.deepcopy(config)
    check_snapshot_schema(config, "rl")
    hosted_config(config)
    assert config == before
