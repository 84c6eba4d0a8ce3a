"""The validator mirrors: prime-rl's validators JSON Schema cannot express, as rules over the table.

Every validator recorded in the shipped snapshot is mirrored by a rule of tools.configs.RULES,
or listed with the reason it is not; each rule names the prime-rl file and function it mirrors,
and those exist. On the corpus's cross-field cases the snapshot with its rules gives the real
schema's verdict and first error (the real schema is the oracle, run from the fixture's
environment), both through mf_validate_config.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from _schema_env import example, first_error, validate_table

from tests._conformance import corpus
from tools.configs import (
    FIELD_BEFORE,
    IN_SCHEMA,
    MODEL_BEFORE,
    MODEL_BEFORE_NOT_MIRRORED,
    NOT_MIRRORED,
    NOT_RAISING,
    RULES,
    ValidateConfigResult,
    load_schema_snapshot,
    subschemas,
)
from tools.core import Context

VALIDATOR_RULES = {rule.id: rule for rule in RULES if rule.scope == "validator"}


def snapshot_validators() -> set[str]:
    names: set[str] = set()
    for mode in ("rl", "sft"):
        for node in subschemas(load_schema_snapshot()[mode]):
            names.update(node.get("x-validators", ()))
            names.update(node.get("x-before", ()))
            for prop in node.get("properties", {}).values():
                names.update(prop.get("x-field-before", ()))
                names.update(prop.get("x-field-after", ()))
    return names


LISTS = {"rule": VALIDATOR_RULES, "not raising": NOT_RAISING, "not mirrored": NOT_MIRRORED,
         "in the schema": IN_SCHEMA, "model before-validator": MODEL_BEFORE,
         "before-validator not mirrored": MODEL_BEFORE_NOT_MIRRORED, "field before-validator": FIELD_BEFORE}


def test_every_validator_of_the_snapshot_is_handled_exactly_once() -> None:
    counts = Counter(name for table in LISTS.values() for name in table)
    assert sorted(n for n, c in counts.items() if c > 1) == []
    assert sorted(snapshot_validators() - set(counts)) == [], "validators nobody handles"
    assert sorted(set(counts) - snapshot_validators()) == [], "names no longer in the snapshot"


def test_validators_not_mirrored_say_why() -> None:
    for table in (NOT_RAISING, NOT_MIRRORED, IN_SCHEMA, MODEL_BEFORE_NOT_MIRRORED):
        assert all(len(reason) > 10 for reason in table.values())


def test_each_rule_cites_a_file_and_function_that_exist_in_the_schema_sources(schema_python: Path) -> None:
    site = next((schema_python.parent.parent / "lib").glob("python3.12/site-packages"))
    for rule in VALIDATOR_RULES.values():
        citation = rule.source
        file, function = citation.split(" ")
        text = (site / file).read_text()
        assert f"def {function.rsplit('.', 1)[-1]}(" in text, citation
        assert f"class {function.split('.')[0]}(" in text, citation


def test_every_rule_names_its_source_severity_and_a_fix() -> None:
    assert len({rule.id for rule in RULES}) == len(RULES)
    for rule in RULES:
        assert rule.source and rule.fix and rule.severity in ("error", "warning") and rule.modes, rule.id
        assert rule.scope == "validator" or rule.source.startswith(("prime 0.18.0", "guardrail", "advice")), rule.id


# --- behaviour, offline ------------------------------------------------------------------------


def first(config: dict, ctx: Context) -> tuple[str, str, str]:
    """(path, rule, message) of the first error mf_validate_config reports (snapshot), the message as
    prime-rl words it (without the bracketed keys and values a cross-field rejection adds)."""
    report = validate_table(config, ctx)
    path, rule = first_error(report)
    return path, rule, re.sub(r" \[[^\[\]]*\]\Z", "", report.errors[0].message)


def test_max_inflight_below_the_group_size_is_refused_on_the_orchestrator(schema_ctx: Context) -> None:
    config = example("basic/alphabet-sort/rl")
    config["orchestrator"]["concurrency"] = {"max_inflight": 8}
    report = validate_table(config, schema_ctx)
    rule = "prime_rl.configs.orchestrator.OrchestratorConfig.resolve_batching"
    assert first_error(report) == ("orchestrator", rule)
    error = report.errors[0]
    assert error.message == ("concurrency.max_inflight must be at least the number of rollouts per example"
                             " [orchestrator.concurrency.max_inflight = 8, orchestrator.group_size = 16]")
    assert error.source == "prime_rl/configs/orchestrator.py OrchestratorConfig.resolve_batching"
    assert error.line is not None and error.fix


def test_context_parallelism_needs_a_custom_or_auto_model_implementation(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    config["trainer"]["model"] = {"cp": 2, "impl": "hf", "attn": "flash_attention_2"}
    assert first(config, schema_ctx)[:2] == ("trainer.model", "prime_rl.configs.trainer.ModelConfig.validate_cp")


def test_a_cosine_scheduler_needs_max_steps(schema_ctx: Context) -> None:
    config = example("basic/hendrycks-sanity/rl")
    del config["max_steps"]
    config["trainer"]["scheduler"] = {"type": "cosine"}
    path, _, message = first(config, schema_ctx)
    assert (path, message) == ("trainer", "Must specify max_steps when using a cosine scheduler")


def test_vlm_training_needs_bfloat16_dtypes(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    config["trainer"]["model"] = {"impl": "custom", "vlm": {"vision_encoder_attr": "model.visual",
                                                            "language_model_attr": "model.language_model"}}
    assert first(config, schema_ctx)[1] == "prime_rl.configs.trainer.TrainerConfig.vlms_require_bfloat16"


def test_an_explicit_trainer_output_dir_conflicts_with_the_run_directory(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    config["trainer"]["output_dir"] = "/tmp/outputs"
    path, rule, message = first(config, schema_ctx)
    assert (path, rule) == ("", "prime_rl.configs.rl.RLConfig.auto_setup_run_dir")
    assert "TrainerConfig.output_dir (/tmp/outputs) conflicts with the run directory" in message


def test_sft_context_parallelism_needs_micro_batch_one_and_a_divisible_seq_len(schema_ctx: Context) -> None:
    config = example("basic/wordle/sft")
    config["model"] = config["model"] | {"cp": 3}
    assert first(config, schema_ctx)[2] == "Sequence length must be divisible by CP degree"
    config["model"]["cp"] = 2
    config["data"]["micro_batch_size"] = 2
    assert first(config, schema_ctx)[2] == "Micro batch size must be 1 when CP is enabled"


def test_a_model_with_a_field_error_is_not_checked_by_its_validators(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    config["trainer"]["model"] = {"cp": 2, "impl": "hf", "attn": "flash_attention_2", "dp_replicate": "two"}
    assert [e.path for e in validate_table(config, schema_ctx).errors] == ["trainer.model.dp_replicate"]


# --- behaviour, against the real schema --------------------------------------------------------

CROSS = [c for c in corpus.cases() if c.id.startswith("cross/")]


def verdict(report: ValidateConfigResult, *, run_start: bool = True) -> tuple[bool, str | None]:
    """(valid, first error path); ``run_start=False`` leaves out what is checked when the run
    starts (when the real schema could not check it: the fixture lacks the config's taskset)."""
    errors = [e for e in report.errors if run_start or "checked when the run starts" not in e.message]
    return not errors, errors[0].path if errors else None


@pytest.mark.parametrize("case", CROSS, ids=[c.id for c in CROSS])
def test_rules_give_the_real_schemas_verdict_on_cross_field_cases(case: corpus.Case, real_schema_ctx: Context) -> None:
    config = corpus.build(case)
    real = validate_table(config, real_schema_ctx, schema="real", name="real.toml")
    assert real.schema_check == "real", real.warnings
    ours = validate_table(config, real_schema_ctx, schema="snapshot", name="snapshot.toml")
    checked = not any("not checked here" in note for note in real.notes)
    assert verdict(ours, run_start=checked) == verdict(real), ([e.message for e in ours.errors],
                                                              [e.message for e in real.errors])
