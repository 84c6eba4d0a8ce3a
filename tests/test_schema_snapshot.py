"""The snapshot back-end: shipped JSON Schemas of RLConfig/SFTConfig, checked in-process.

The shipped files must equal a fresh export from ``../shared/fixtures/prime-rl-schema`` (the
platform's schema commit), and on the bundled examples the snapshot must give the verdicts
the fixture's PROVENANCE.md records for ``prime train validate``. The behaviour tests below
need no prime-rl: they pin what pydantic does that JSON Schema alone would not (lax types,
before-validators, error order), each cross-checked against the real schema in
tests/test_schema_real.py and the conformance test.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from _schema_env import example, first_error, validate_table
from jsonschema import Draft202012Validator

from tests._conformance import envs
from tools.configs import (
    EXAMPLES_DIR,
    SCHEMA_SNAPSHOT_DIR,
    check_snapshot_schema,
    export_schema_raw,
    finalize_schema_export,
    load_schema_snapshot,
    subschemas,
)
from tools.core import Context

# --- the shipped files ------------------------------------------------------------------


def test_shipped_snapshot_equals_a_fresh_export_from_the_fixture(schema_python: Path) -> None:
    raw = export_schema_raw([str(schema_python), "-I", "-B"])
    fresh = finalize_schema_export(raw, commit=envs.FIXTURE_COMMIT)
    for name, data in fresh.items():
        shipped = (SCHEMA_SNAPSHOT_DIR / name).read_bytes()
        assert shipped == data, f"{name} differs from a fresh export: run scripts/export_schema_snapshot.py"


def test_shipped_schemas_are_valid_draft_2020_12_and_name_the_schema_commit() -> None:
    shipped = load_schema_snapshot()
    for mode in ("rl", "sft"):
        Draft202012Validator.check_schema(shipped[mode])
        assert shipped[mode]["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    metadata = shipped["metadata"]
    assert metadata["schema_commit"] == envs.FIXTURE_COMMIT
    assert metadata["models"] == {"rl": "prime_rl.configs.rl.RLConfig", "sft": "prime_rl.configs.sft.SFTConfig"}
    assert "scripts/export_schema_snapshot.py" in metadata["made_by"]


def test_every_model_in_the_snapshot_forbids_extra_keys_unless_prime_rl_allows_them() -> None:
    allowed = set()
    for mode in ("rl", "sft"):
        for node in subschemas(load_schema_snapshot()[mode]):
            if "x-model" in node:
                forbids = node.get("additionalProperties") is False
                assert forbids == (node["x-extra"] == "forbid"), node["x-model"]
                if not forbids:
                    allowed.add(node["x-model"].rsplit(".", 1)[-1])
    assert allowed == {"VllmConfig", "DefaultRendererConfig", "CustomRendererConfig"}


def test_discriminated_unions_become_a_tag_enum_with_one_branch_per_tag() -> None:
    deployment = load_schema_snapshot()["rl"]["properties"]["deployment"]
    assert deployment["x-discriminator"] == "type"
    assert deployment["properties"]["type"]["enum"] == ["single_node", "multi_node"]
    assert [b["then"]["$ref"] for b in deployment["allOf"]] == ["#/$defs/SingleNodeDeploymentConfig",
                                                               "#/$defs/MultiNodeDeploymentConfig"]


# --- the bundled examples ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(str(p.relative_to(EXAMPLES_DIR).with_suffix(""))
                                        for p in EXAMPLES_DIR.rglob("*.toml")))
def test_snapshot_gives_each_example_the_verdict_prime_train_validate_gives(name: str, schema_ctx: Context,
                                                                           hosted_column: dict[str, bool]) -> None:
    report = validate_table(example(name), schema_ctx)
    assert report.valid == hosted_column[name], [e.model_dump() for e in report.errors]
    assert report.schema_check == "snapshot" and report.schema_commit == envs.FIXTURE_COMMIT


def test_checking_never_changes_the_callers_table() -> None:
    config = example("advanced/glm-4.5-air/swe")
    before = copy.deepcopy(config)
    check_snapshot_schema(config, "rl")
    check_snapshot_schema(config, "rl", rules=False)
    assert config == before


# --- what pydantic does that JSON Schema alone would not --------------------------------


def with_value(config: dict, path: str, value: object) -> dict:
    *parents, last = path.split(".")
    node = config
    for part in parents:
        node = node[part]
    node[last] = value
    return config


@pytest.mark.parametrize(("path", "value"), [
    ("max_steps", "20"), ("max_steps", "20.0"), ("max_steps", " 20 "), ("orchestrator.batch_size", 128.0),
    ("trainer.optim.lr", "3e-6"), ("monitors.wandb.offline", "false"), ("ckpt", "None"),
])
def test_lax_values_pydantic_accepts_are_not_errors(path: str, value: object, schema_ctx: Context) -> None:
    report = validate_table(with_value(example("basic/reverse-text/rl"), path, value), schema_ctx)
    assert report.valid, report.errors


@pytest.mark.parametrize("value", [20.5, "2e1", "twenty"])
def test_values_pydantic_refuses_for_an_integer_are_errors_first_where_the_shared_value_lands(
        value: object, schema_ctx: Context) -> None:
    report = validate_table(example("basic/reverse-text/rl") | {"max_steps": value}, schema_ctx)
    # RLConfig copies a shared max_steps into trainer and orchestrator before checking types;
    # [trainer] comes first in RLConfig, so that is where pydantic reports it first.
    assert first_error(report) == ("trainer.max_steps", "schema:type")
    assert [e.path for e in report.errors] == ["trainer.max_steps", "orchestrator.max_steps", "max_steps"]
    assert report.errors[0].line == 1  # not written under [trainer]: the shared key it came from is


def test_unknown_keys_are_found_at_every_depth_one_issue_per_key(schema_ctx: Context) -> None:
    config = example("basic/alphabet-sort/rl")
    config["trainer"]["model"]["lora"]["ranks"] = config["trainer"]["model"]["lora"].pop("rank")
    config["orchestrator"]["batchsize"] = 1
    report = validate_table(config, schema_ctx)
    assert [e.path for e in report.errors] == ["trainer.model.lora.ranks", "orchestrator.batchsize"]
    assert all(e.rule == "schema:additionalProperties" for e in report.errors)


def test_errors_come_in_pydantic_order_declared_fields_before_extra_keys(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    config["orchestrator"]["zz"] = 1
    config["orchestrator"]["batch_size"] = "many"
    assert [e.path for e in validate_table(config, schema_ctx).errors] == ["orchestrator.batch_size",
                                                                          "orchestrator.zz"]


def test_an_unknown_union_tag_is_reported_on_the_table_not_on_its_type_key(schema_ctx: Context) -> None:
    config = example("advanced/qwen3-30b-a3b/math")
    config["weight_broadcast"]["type"] = "gloo"
    assert first_error(validate_table(config, schema_ctx)) == ("weight_broadcast", "schema:discriminator")


def test_shared_value_conflicting_with_a_sub_config_is_one_error_on_the_whole_file(schema_ctx: Context) -> None:
    config = example("basic/wiki-search/rl")
    config["trainer"]["max_steps"] = "200"  # compared as written: "200" is not 200
    report = validate_table(config, schema_ctx)
    rule = "prime_rl.configs.rl.RLConfig.auto_setup_shared_configs"
    assert [(e.path, e.rule) for e in report.errors] == [("", rule)]


def test_vllm_pass_through_arguments_are_accepted_and_kebab_case_lands_on_the_typed_field(
        schema_ctx: Context) -> None:
    config = example("basic/wordle/rl")
    config["inference"]["vllm"]["max_num_seqs"] = 256
    assert validate_table(config, schema_ctx).valid
    config["inference"]["vllm"]["max-model-len"] = "long"
    report = validate_table(config, schema_ctx, name="kebab.toml")
    assert first_error(report) == ("inference.vllm.max_model_len", "schema:type")


def test_sft_deployment_accepts_num_eval_gpus_as_the_alias_of_num_infer_gpus(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/sft")
    config["deployment"]["num_eval_gpus"] = config["deployment"].pop("num_infer_gpus")
    assert validate_table(config, schema_ctx).valid


def test_a_cached_result_is_the_same_verdict() -> None:
    config = example("basic/wordle/rl") | {"max_steps": 4321}  # checked by no other test
    first = check_snapshot_schema(config, "rl")
    second = check_snapshot_schema(config, "rl")
    assert not first.cached and second.cached
    assert json.dumps([f.to_dict() for f in first.findings]) == json.dumps([f.to_dict() for f in second.findings])


# --- environment tables of the tasksets the snapshot knows -------------------------------------


def source_env(config: dict) -> dict:
    return config["orchestrator"]["train"]["source"][0]["env"]


def test_the_snapshot_records_the_environment_keys_of_the_bundled_examples_tasksets() -> None:
    plugins = load_schema_snapshot()["metadata"]["plugins"]
    assert {"reverse-text", "alphabet-sort", "wordle", "wiki-search", ""} <= set(plugins["tasksets"])
    assert plugins["tasksets"]["wordle"]["roles"].keys() == {"player"}
    assert {"null", "bash", "rlm"} <= set(plugins["harnesses"]) and "subprocess" in plugins["runtimes"]


@pytest.mark.parametrize(("where", "key"), [("taskset", "idd"), ("agent.harness", "ids"), ("agent.runtime", "types"),
                                            ("agent", "harnes"), ("", "tasksets")])
def test_an_unknown_key_in_a_known_tasksets_env_is_an_error_when_the_run_starts(where: str, key: str,
                                                                                schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    table = source_env(config)
    for part in where.split(".") if where else ():
        table = table[part]
    table[key] = 1
    report = validate_table(config, schema_ctx)
    dotted = ".".join(p for p in ("orchestrator.train.source[0].env", where, key) if p)
    assert first_error(report)[0] == dotted and "checked when the run starts" in report.errors[0].message


def test_a_role_the_tasksets_env_does_not_have_is_an_unknown_key(schema_ctx: Context) -> None:
    config = example("basic/wordle/rl")
    source_env(config)["agent"] = source_env(config).pop("player")  # wordle's role is "player"
    assert first_error(validate_table(config, schema_ctx))[0] == "orchestrator.train.source[0].env.agent"


def test_envs_the_snapshot_cannot_know_are_not_checked(schema_ctx: Context) -> None:
    unknown_taskset = example("basic/hendrycks-sanity/rl")  # math-env: not recorded
    source_env(unknown_taskset)["taskset"]["anything"] = 1
    assert validate_table(unknown_taskset, schema_ctx).valid
    paired = example("basic/reverse-text/rl")  # an env id picks another env class
    source_env(paired)["id"] = "best-of-n"
    source_env(paired)["anything"] = 1
    assert validate_table(paired, schema_ctx, name="paired.toml").valid


def test_a_harness_that_verifiers_would_crash_on_is_an_error_on_the_whole_file(schema_ctx: Context) -> None:
    config = example("basic/reverse-text/rl")
    source_env(config)["agent"]["harness"] = True  # dict(True): TypeError, which pydantic lets through
    assert first_error(validate_table(config, schema_ctx)) == ("", "schema:exception")
