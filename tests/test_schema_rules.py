"""Structural rules: the prime-rl validators JSON Schema cannot express, as functions over the table.

Every validator recorded in the shipped snapshot is mirrored by a rule, or listed with the
reason it is not; each rule names the prime-rl file and function it mirrors, and those exist.
On the corpus's cross-field cases the snapshot with its rules gives the real schema's verdict
and first error (the real schema is the oracle, run from the fixture's environment).
"""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path

import pytest

import schema_staging
from benchmarks._conformance import corpus
from schema_staging import _export, _prepass, _rules

pytest_plugins = ["_schema_env"]  # fixture: schema_python
ROOT = Path(__file__).resolve().parent.parent


def snapshot_validators() -> set[str]:
    names: set[str] = set()
    for mode in ("rl", "sft"):
        for node in _export._schemas(_export.load_snapshot()[mode]):
            names.update(node.get("x-validators", ()))
            names.update(node.get("x-before", ()))
            for prop in node.get("properties", {}).values():
                names.update(prop.get("x-field-before", ()))
                names.update(prop.get("x-field-after", ()))
    return names


LISTS = {"rule": _rules.RULES, "not raising": _rules.NOT_RAISING, "not mirrored": _rules.NOT_MIRRORED,
         "in the schema": _rules.IN_SCHEMA, "model before-validator": _prepass.MODEL_BEFORE,
         "before-validator not mirrored": _prepass.MODEL_BEFORE_NOT_MIRRORED,
         "field before-validator": _prepass.FIELD_BEFORE}


def test_every_validator_of_the_snapshot_is_handled_exactly_once() -> None:
    counts = Counter(name for table in LISTS.values() for name in table)
    assert sorted(n for n, c in counts.items() if c > 1) == []
    assert sorted(snapshot_validators() - set(counts)) == [], "validators nobody handles"
    assert sorted(set(counts) - snapshot_validators()) == [], "names no longer in the snapshot"


def test_validators_not_mirrored_say_why() -> None:
    for table in (_rules.NOT_RAISING, _rules.NOT_MIRRORED, _rules.IN_SCHEMA, _prepass.MODEL_BEFORE_NOT_MIRRORED):
        assert all(len(reason) > 10 for reason in table.values())


def test_each_rule_cites_a_file_and_function_that_exist_in_the_schema_sources(schema_python: Path) -> None:
    site = next((schema_python.parent.parent / "lib").glob("python3.12/site-packages"))
    for name in _rules.RULES:
        citation = _rules.source_of(name)
        file, function = citation.split(" ")
        text = (site / file).read_text()
        assert f"def {function.rsplit('.', 1)[-1]}(" in text, citation
        assert f"class {function.split('.')[0]}(" in text, citation


# --- behaviour, offline ------------------------------------------------------------------------


def example(name: str) -> dict:
    return tomllib.loads((ROOT / "tools" / "examples" / f"{name}.toml").read_text())


def first(config: dict) -> schema_staging.Finding:
    verdict = schema_staging.check_snapshot(config)
    assert verdict.first_error is not None, verdict.findings
    return verdict.first_error


def test_max_inflight_below_the_group_size_is_refused_on_the_orchestrator() -> None:
    config = example("basic/alphabet-sort/rl")
    config["orchestrator"]["concurrency"] = {"max_inflight": 8}
    error = first(config)
    rule = "prime_rl.configs.orchestrator.OrchestratorConfig.resolve_batching"
    assert (error.path, error.rule) == ("orchestrator", rule)
    assert error.message == "concurrency.max_inflight must be at least the number of rollouts per example"
    assert error.source == "prime_rl/configs/orchestrator.py OrchestratorConfig.resolve_batching"


def test_context_parallelism_needs_a_custom_or_auto_model_implementation() -> None:
    config = example("basic/reverse-text/rl")
    config["trainer"]["model"] = {"cp": 2, "impl": "hf", "attn": "flash_attention_2"}
    error = first(config)
    assert (error.path, error.rule) == ("trainer.model", "prime_rl.configs.trainer.ModelConfig.validate_cp")


def test_a_cosine_scheduler_needs_max_steps() -> None:
    config = example("basic/hendrycks-sanity/rl")
    del config["max_steps"]
    config["trainer"]["scheduler"] = {"type": "cosine"}
    error = first(config)
    assert (error.path, error.message) == ("trainer", "Must specify max_steps when using a cosine scheduler")


def test_vlm_training_needs_bfloat16_dtypes() -> None:
    config = example("basic/reverse-text/rl")
    config["trainer"]["model"] = {"impl": "custom", "vlm": {"vision_encoder_attr": "model.visual",
                                                            "language_model_attr": "model.language_model"}}
    assert first(config).rule == "prime_rl.configs.trainer.TrainerConfig.vlms_require_bfloat16"


def test_an_explicit_trainer_output_dir_conflicts_with_the_run_directory() -> None:
    config = example("basic/reverse-text/rl")
    config["trainer"]["output_dir"] = "/tmp/outputs"
    error = first(config)
    assert (error.path, error.rule) == ("", "prime_rl.configs.rl.RLConfig.auto_setup_run_dir")
    assert "TrainerConfig.output_dir (/tmp/outputs) conflicts with the run directory" in error.message


def test_sft_context_parallelism_needs_micro_batch_one_and_a_divisible_seq_len() -> None:
    config = example("basic/wordle/sft")
    config["model"] = config["model"] | {"cp": 3}
    assert first(config).message == "Sequence length must be divisible by CP degree"
    config["model"]["cp"] = 2
    config["data"]["micro_batch_size"] = 2
    assert first(config).message == "Micro batch size must be 1 when CP is enabled"


def test_a_model_with_a_field_error_is_not_checked_by_its_validators() -> None:
    config = example("basic/reverse-text/rl")
    config["trainer"]["model"] = {"cp": 2, "impl": "hf", "attn": "flash_attention_2", "dp_replicate": "two"}
    verdict = schema_staging.check_snapshot(config)
    assert [f.path for f in verdict.errors] == ["trainer.model.dp_replicate"]


# --- behaviour, against the real schema --------------------------------------------------------

CROSS = [c for c in corpus.cases() if c.id.startswith("cross/")]


@pytest.mark.parametrize("case", CROSS, ids=[c.id for c in CROSS])
def test_rules_give_the_real_schemas_verdict_on_cross_field_cases(case: corpus.Case, schema_python: Path) -> None:
    config = corpus.build(case)
    real = schema_staging.check_real(config, python=schema_python, run_start=False)
    ours = schema_staging.check_snapshot(config, run_start=False)
    assert ours.valid == real.valid, (ours.first_error, real.first_error)
    if not real.valid:
        assert ours.first_error is not None and real.first_error is not None
        assert ours.first_error.path == real.first_error.path, (ours.first_error.message, real.first_error.message)

