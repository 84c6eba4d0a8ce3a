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
import tomllib
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

import schema_staging
from benchmarks._conformance import envs
from schema_staging import _export

pytest_plugins = ["_schema_env"]  # fixtures: schema_python, hosted_column
ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tools" / "examples"


def example(name: str) -> dict:
    return tomllib.loads((EXAMPLES / f"{name}.toml").read_text())


def first_error(verdict: schema_staging.Verdict) -> tuple[str, str]:
    first = verdict.first_error
    assert first is not None, f"expected an error, got {verdict.findings}"
    return first.path, first.rule


# --- the shipped files ------------------------------------------------------------------


def test_shipped_snapshot_equals_a_fresh_export_from_the_fixture(schema_python: Path) -> None:
    raw = _export.export_raw([str(schema_python), "-I", "-B"])
    fresh = _export.finalize(raw, commit=envs.FIXTURE_COMMIT)
    for name, data in fresh.items():
        shipped = (_export.SNAPSHOT_DIR / name).read_bytes()
        assert shipped == data, f"{name} differs from a fresh export: run `python -m schema_staging export`"


def test_shipped_schemas_are_valid_draft_2020_12_and_name_the_schema_commit() -> None:
    shipped = _export.load_snapshot()
    for mode in ("rl", "sft"):
        Draft202012Validator.check_schema(shipped[mode])
        assert shipped[mode]["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    metadata = shipped["metadata"]
    assert metadata["schema_commit"] == envs.FIXTURE_COMMIT
    assert metadata["models"] == {"rl": "prime_rl.configs.rl.RLConfig", "sft": "prime_rl.configs.sft.SFTConfig"}
    assert "python -m schema_staging export" in metadata["made_by"]


def test_every_model_in_the_snapshot_forbids_extra_keys_unless_prime_rl_allows_them() -> None:
    allowed = set()
    for mode in ("rl", "sft"):
        for node in _export._schemas(_export.load_snapshot()[mode]):
            if "x-model" in node:
                forbids = node.get("additionalProperties") is False
                assert forbids == (node["x-extra"] == "forbid"), node["x-model"]
                if not forbids:
                    allowed.add(node["x-model"].rsplit(".", 1)[-1])
    assert allowed == {"VllmConfig", "DefaultRendererConfig", "CustomRendererConfig"}


def test_discriminated_unions_become_a_tag_enum_with_one_branch_per_tag() -> None:
    deployment = _export.load_snapshot()["rl"]["properties"]["deployment"]
    assert deployment["x-discriminator"] == "type"
    assert deployment["properties"]["type"]["enum"] == ["single_node", "multi_node"]
    assert [b["then"]["$ref"] for b in deployment["allOf"]] == ["#/$defs/SingleNodeDeploymentConfig",
                                                               "#/$defs/MultiNodeDeploymentConfig"]


# --- the bundled examples ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(str(p.relative_to(EXAMPLES).with_suffix(""))
                                        for p in EXAMPLES.rglob("*.toml")))
def test_snapshot_gives_each_example_the_verdict_prime_train_validate_gives(name: str,
                                                                           hosted_column: dict[str, bool]) -> None:
    verdict = schema_staging.check_snapshot(example(name))
    assert verdict.valid == hosted_column[name], [f.to_dict() for f in verdict.errors]
    assert verdict.backend == "snapshot" and verdict.schema_commit == envs.FIXTURE_COMMIT


def test_sft_example_with_online_eval_is_valid_with_a_warning_naming_the_set_aside_blocks() -> None:
    verdict = schema_staging.check_snapshot(example("basic/reverse-text/sft"))
    assert verdict.valid
    warnings = [f for f in verdict.findings if f.rule == "hosted:sft_online_eval"]
    assert len(warnings) == 1 and "[eval], [inference]" in warnings[0].message and "trainer-only" in warnings[0].message


def test_checking_never_changes_the_callers_table() -> None:
    config = example("advanced/glm-4.5-air/swe")
    before = copy.deepcopy(config)
    schema_staging.check_snapshot(config)
    schema_staging.check_snapshot(config, rules=False)
    assert config == before


# --- what pydantic does that JSON Schema alone would not --------------------------------


@pytest.mark.parametrize(("path", "value"), [
    ("max_steps", "20"), ("max_steps", "20.0"), ("max_steps", " 20 "), ("orchestrator.batch_size", 128.0),
    ("trainer.optim.lr", "3e-6"), ("monitors.wandb.offline", "false"), ("ckpt", "None"),
])
def test_lax_values_pydantic_accepts_are_not_errors(path: str, value: object) -> None:
    config = example("basic/reverse-text/rl")
    *parents, last = path.split(".")
    node = config
    for part in parents:
        node = node[part]
    node[last] = value
    assert schema_staging.check_snapshot(config).valid


@pytest.mark.parametrize("value", [20.5, "2e1", "twenty"])
def test_values_pydantic_refuses_for_an_integer_are_errors_first_where_the_shared_value_lands(value: object) -> None:
    config = example("basic/reverse-text/rl") | {"max_steps": value}
    verdict = schema_staging.check_snapshot(config)
    # RLConfig copies a shared max_steps into trainer and orchestrator before checking types;
    # [trainer] comes first in RLConfig, so that is where pydantic reports it first.
    assert first_error(verdict) == ("trainer.max_steps", "schema:type")
    assert [f.path for f in verdict.errors] == ["trainer.max_steps", "orchestrator.max_steps", "max_steps"]


def test_unknown_keys_are_found_at_every_depth_one_finding_per_key() -> None:
    config = example("basic/alphabet-sort/rl")
    config["trainer"]["model"]["lora"]["ranks"] = config["trainer"]["model"]["lora"].pop("rank")
    config["orchestrator"]["batchsize"] = 1
    verdict = schema_staging.check_snapshot(config)
    paths = [f.path for f in verdict.errors]
    assert paths == ["trainer.model.lora.ranks", "orchestrator.batchsize"]
    assert all(f.rule == "schema:additionalProperties" for f in verdict.errors)


def test_errors_come_in_pydantic_order_declared_fields_before_extra_keys() -> None:
    config = example("basic/reverse-text/rl")
    config["orchestrator"]["zz"] = 1
    config["orchestrator"]["batch_size"] = "many"
    assert [f.path for f in schema_staging.check_snapshot(config).errors] == ["orchestrator.batch_size",
                                                                             "orchestrator.zz"]


def test_an_unknown_union_tag_is_reported_on_the_table_not_on_its_type_key() -> None:
    config = example("advanced/qwen3-30b-a3b/math")
    config["weight_broadcast"]["type"] = "gloo"
    path, rule = first_error(schema_staging.check_snapshot(config))
    assert (path, rule) == ("weight_broadcast", "schema:discriminator")


def test_shared_value_conflicting_with_a_sub_config_is_one_error_on_the_whole_file() -> None:
    config = example("basic/wiki-search/rl")
    config["trainer"]["max_steps"] = "200"  # compared as written: "200" is not 200
    verdict = schema_staging.check_snapshot(config)
    rule = "prime_rl.configs.rl.RLConfig.auto_setup_shared_configs"
    assert [(f.path, f.rule) for f in verdict.errors] == [("", rule)]


def test_vllm_pass_through_arguments_are_accepted_and_kebab_case_lands_on_the_typed_field() -> None:
    config = example("basic/wordle/rl")
    config["inference"]["vllm"]["max_num_seqs"] = 256
    assert schema_staging.check_snapshot(config).valid
    config["inference"]["vllm"]["max-model-len"] = "long"
    assert first_error(schema_staging.check_snapshot(config)) == ("inference.vllm.max_model_len", "schema:type")


def test_sft_deployment_accepts_num_eval_gpus_as_the_alias_of_num_infer_gpus() -> None:
    config = example("basic/reverse-text/sft")
    config["deployment"]["num_eval_gpus"] = config["deployment"].pop("num_infer_gpus")
    assert schema_staging.check_snapshot(config).valid


def test_a_cached_result_is_the_same_verdict() -> None:
    config = example("basic/wordle/rl")
    first = schema_staging.check_snapshot(config)
    second = schema_staging.check_snapshot(config)
    assert json.dumps([f.to_dict() for f in first.findings]) == json.dumps([f.to_dict() for f in second.findings])


# --- environment tables of the tasksets the snapshot knows -------------------------------------


def source_env(config: dict) -> dict:
    return config["orchestrator"]["train"]["source"][0]["env"]


def test_the_snapshot_records_the_environment_keys_of_the_bundled_examples_tasksets() -> None:
    plugins = _export.load_snapshot()["metadata"]["plugins"]
    assert {"reverse-text", "alphabet-sort", "wordle", "wiki-search", ""} <= set(plugins["tasksets"])
    assert plugins["tasksets"]["wordle"]["roles"].keys() == {"player"}
    assert {"null", "bash", "rlm"} <= set(plugins["harnesses"]) and "subprocess" in plugins["runtimes"]


@pytest.mark.parametrize(("where", "key"), [("taskset", "idd"), ("agent.harness", "ids"), ("agent.runtime", "types"),
                                            ("agent", "harnes"), ("", "tasksets")])
def test_an_unknown_key_in_a_known_tasksets_env_is_an_error_when_the_run_starts(where: str, key: str) -> None:
    config = example("basic/reverse-text/rl")
    table = source_env(config)
    for part in where.split(".") if where else ():
        table = table[part]
    table[key] = 1
    error = schema_staging.check_snapshot(config).first_error
    dotted = ".".join(p for p in ("orchestrator.train.source[0].env", where, key) if p)
    assert (error.path, error.stage) == (dotted, "run_start")


def test_a_role_the_tasksets_env_does_not_have_is_an_unknown_key() -> None:
    config = example("basic/wordle/rl")
    source_env(config)["agent"] = source_env(config).pop("player")  # wordle's role is "player"
    assert schema_staging.check_snapshot(config).first_error.path == "orchestrator.train.source[0].env.agent"


def test_envs_the_snapshot_cannot_know_are_not_checked() -> None:
    unknown_taskset = example("basic/hendrycks-sanity/rl")  # math-env: not recorded
    source_env(unknown_taskset)["taskset"]["anything"] = 1
    assert schema_staging.check_snapshot(unknown_taskset).valid
    paired = example("basic/reverse-text/rl")  # an env id picks another env class
    source_env(paired)["id"] = "best-of-n"
    source_env(paired)["anything"] = 1
    assert schema_staging.check_snapshot(paired).valid


def test_a_harness_that_verifiers_would_crash_on_is_an_error_on_the_whole_file() -> None:
    config = example("basic/reverse-text/rl")
    source_env(config)["agent"]["harness"] = True  # dict(True): TypeError, which pydantic lets through
    error = schema_staging.check_snapshot(config).first_error
    assert (error.path, error.kind) == ("", "exception")
