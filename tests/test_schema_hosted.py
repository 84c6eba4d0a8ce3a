"""The hosted pipeline both back-ends share: what prime train validate 0.18.0 does around the schema.

The CLI drops its own keys and translates deprecated ``[orchestrator]`` keys; its schema worker
refuses ``[k8s]``, sets environment sources (RL) or the online-eval blocks (SFT) aside, adds
``slurm = {}`` for multi-node, validates, applies the hosted rejections and checks the
set-aside blocks; the platform then checks the sources when the run starts. Checked here
through the snapshot back-end (no prime-rl needed); tests/test_schema_conformance.py checks
the same pipeline against prime's own code.
"""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import schema_staging
from schema_staging import Finding, sniff_mode

ROOT = Path(__file__).resolve().parent.parent


def example(name: str) -> dict:
    return tomllib.loads((ROOT / "tools" / "examples" / f"{name}.toml").read_text())


def check(config: dict, **kwargs: object) -> schema_staging.Verdict:
    return schema_staging.check_snapshot(config, **kwargs)  # type: ignore[arg-type]


def by_rule(verdict: schema_staging.Verdict, rule: str) -> list[Finding]:
    return [f for f in verdict.findings if f.rule == rule]


# --- the CLI ---------------------------------------------------------------------------------


def test_eval_base_model_is_translated_to_skip_first_step_with_the_opposite_value() -> None:
    config = example("basic/hendrycks-sanity/rl")
    config["orchestrator"]["eval"]["eval_base_model"] = False
    verdict = check(config)
    assert verdict.valid
    [warning] = by_rule(verdict, "cli:deprecated_key")
    assert warning.path == "orchestrator.eval.eval_base_model" and warning.severity == "warning"
    assert "prime train sends skip_first_step = true" in warning.message
    assert "opposite meaning" in warning.message


def test_when_skip_first_step_is_also_set_it_wins_and_eval_base_model_is_ignored() -> None:
    config = example("basic/hendrycks-sanity/rl")
    config["orchestrator"]["eval"] |= {"eval_base_model": True, "skip_first_step": True}
    verdict = check(config)
    [warning] = by_rule(verdict, "cli:deprecated_key")
    assert verdict.valid and "ignored because orchestrator.eval.skip_first_step is also set" in warning.message


def test_orchestrator_buffer_and_trajectory_strategy_are_dropped_with_warnings() -> None:
    config = example("basic/wordle/rl")
    config["orchestrator"] |= {"buffer": {"online_difficulty_filtering": True}, "trajectory_strategy": "interleaved"}
    verdict = check(config)
    assert verdict.valid
    assert [f.path for f in by_rule(verdict, "cli:deprecated_key")] == ["orchestrator.trajectory_strategy",
                                                                        "orchestrator.buffer"]


def test_a_top_level_buffer_is_not_translated_and_the_schema_refuses_it() -> None:
    config = example("basic/reverse-text/rl") | {"buffer": {"online_difficulty_filtering": True}}
    verdict = check(config)
    assert (verdict.first_error.path, verdict.first_error.rule) == ("buffer", "schema:additionalProperties")


def test_keys_prime_train_reads_itself_are_not_validated_and_type_gets_a_warning() -> None:
    config = example("basic/reverse-text/rl") | {"image_tag": "v0.5.0", "gpu_type": "H200_141GB", "volume": "research",
                                                 "volume_size": "2Ti", "source_ref": "main", "name": "demo",
                                                 "env_files": ["secrets.env"], "type": "full_finetune"}
    verdict = check(config)
    assert verdict.valid and [f.path for f in by_rule(verdict, "cli:type")] == ["type"]


def test_mode_is_sniffed_like_prime_train() -> None:
    assert sniff_mode(example("basic/wordle/sft")) == "sft"
    assert sniff_mode(example("basic/wordle/rl")) == "rl"
    assert sniff_mode(example("basic/wordle/sft") | {"orchestrator": {}}) == "rl"
    assert sniff_mode(example("basic/wordle/rl"), "sft") == "sft"


# --- the worker ------------------------------------------------------------------------------


def test_a_k8s_table_is_refused_and_an_empty_one_is_dropped() -> None:
    config = example("basic/wiki-search/rl")
    refused = check(config | {"k8s": {"namespace": "research"}})
    assert (refused.first_error.path, refused.first_error.rule) == ("k8s", "hosted:k8s")
    assert check(config | {"k8s": {}}).valid


def test_multi_node_without_slurm_gets_an_empty_slurm_table() -> None:
    config = example("advanced/qwen3-30b-a3b/math")
    del config["slurm"]
    assert check(config).valid


def test_hosted_rl_rejects_clean_and_runs_without_inference_gpus_but_sft_does_not() -> None:
    clean = check(example("basic/reverse-text/rl") | {"clean": True})
    assert (clean.first_error.path, clean.first_error.rule) == ("clean", "hosted:clean")
    assert check(example("basic/wordle/sft") | {"clean": True}).valid
    config = example("basic/reverse-text/rl")
    del config["inference"]
    assert check(config).first_error.rule == "hosted:needs_inference_gpus"
    config["trainer"]["data"] = {"fake": {}}
    assert check(config).valid


def test_hosted_rejections_come_after_schema_errors() -> None:
    config = example("basic/reverse-text/rl") | {"clean": True}
    config["orchestrator"]["batch_size"] = 0
    assert check(config).first_error.path == "orchestrator.batch_size"


def test_errors_inside_a_set_aside_block_count_but_its_own_validators_do_not() -> None:
    config = example("basic/reverse-text/sft")
    config["eval"]["interval"] = 0
    verdict = check(config)
    assert (verdict.first_error.path, verdict.first_error.stage) == ("eval.interval", "deferred")
    without_sources = example("basic/reverse-text/sft")
    del without_sources["eval"]["source"]  # EvalConfig.validate_non_empty_sources: needs the sources set aside
    assert check(without_sources).valid


def test_rl_environment_sources_are_checked_as_the_platform_does_when_the_run_starts() -> None:
    config = example("basic/reverse-text/rl")
    config["orchestrator"]["train"]["source"][0]["ratio"] = 0
    verdict = check(config)
    assert (verdict.first_error.path, verdict.first_error.stage) == ("orchestrator.train.source[0].ratio", "run_start")
    assert "checked when the run starts" in verdict.first_error.message
    assert check(config, run_start=False).valid  # what prime train validate alone says


def test_checking_leaves_the_callers_config_unchanged() -> None:
    config = example("basic/hendrycks-sanity/rl")
    config["orchestrator"]["eval"]["eval_base_model"] = False
    config["k8s"] = {}
    before = copy.deepcopy(config)
    check(config)
    assert config == before
