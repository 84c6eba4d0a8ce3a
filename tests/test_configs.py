"""tools.configs on the real bundled examples and on mutated copies in tmp folders.

Expected verdicts are those of `prime train validate` 0.18.0 on the platform's schema (the
fixture's PROVENANCE.md, hosted column): every example passes except advanced/glm-5.2/swe
(disaggregated inference); reverse-text/sft passes with its online-eval blocks set aside.
These tests use the schema snapshot (no prime-rl here; tests/test_schema_real.py runs the real
schema). Negative cases are the §9.3 mutations and the CLI's own local checks (prime-api.md
§3.2), applied to the real TOMLs with tomlkit and written to tmp files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from skill.registry import call_tool
from tools.configs import (
    EXAMPLES_DIR,
    RULES,
    ListExamplesInput,
    PrepareConfigInput,
    ValidateConfigInput,
    list_examples,
    prepare_config,
    validate_config,
    write_new_file,
)
from tools.core import Context
from tools.errors import ToolError, ToolFailure

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = EXAMPLES_DIR

#: The error rules each example must raise (empty = passes), as prime train validate 0.18.0 says.
EXPECTED_ERRORS: dict[str, set[str]] = {
    "basic/reverse-text/rl": set(),
    "basic/reverse-text/sft": set(),
    "basic/alphabet-sort/rl": set(),
    "basic/wordle/rl": set(),
    "basic/wordle/sft": set(),
    "basic/wiki-search/rl": set(),
    "basic/hendrycks-sanity/rl": set(),
    "advanced/qwen3-30b-a3b/math": set(),
    "advanced/glm-4.5-air/swe": set(),
    "advanced/glm-5.2/swe": {"disaggregated_inference"},
}
#: §5.1 facts: mode, model, max_steps, GPUs as written.
FACTS: dict[str, tuple[str, str, int | None, int]] = {
    "basic/reverse-text/rl": ("rl", "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT", 20, 2),
    "basic/reverse-text/sft": ("sft", "PrimeIntellect/Qwen3-0.6B", 100, 2),
    "basic/alphabet-sort/rl": ("rl", "Qwen/Qwen3-4B-Instruct-2507", 200, 2),
    "basic/wordle/rl": ("rl", "PrimeIntellect/Qwen3-1.7B-Wordle-SFT", 200, 8),
    "basic/wordle/sft": ("sft", "PrimeIntellect/Qwen3-1.7B", 20, 1),
    "basic/wiki-search/rl": ("rl", "Qwen/Qwen3-4B-Instruct-2507", 200, 8),
    "basic/hendrycks-sanity/rl": ("rl", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 5000, 8),
    "advanced/qwen3-30b-a3b/math": ("rl", "Qwen/Qwen3-30B-A3B-Thinking-2507", None, 32),
    "advanced/glm-4.5-air/swe": ("rl", "zai-org/GLM-4.5-Air", 1000, 32),
    "advanced/glm-5.2/swe": ("rl", "zai-org/GLM-5", None, 256),
}


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    return Context(env={"PATH": os.environ.get("PATH", "")}, home=tmp_path / "home", cwd=tmp_path)


def validate(path: Path, ctx: Context, mode: str | None = None):
    result = validate_config(ValidateConfigInput(config_path=str(path), mode=mode), ctx)
    assert not isinstance(result, ToolError), result
    return result


def rules(issues) -> set[str]:
    return {i.rule for i in issues}


def write_toml(ctx: Context, name: str, text: str) -> Path:
    path = ctx.cwd / name
    path.write_text(text)
    return path


def mutated(tmp_path: Path, example: str, edit: Callable[[Any], None], name: str = "case.toml") -> Path:
    """The real example, parsed with tomlkit, edited, written to a tmp file."""
    doc = tomlkit.parse((EXAMPLES / f"{example}.toml").read_text())
    edit(doc)
    out = tmp_path / name
    out.write_text(tomlkit.dumps(doc))
    return out


# -- the real examples ------------------------------------------------------------------


def test_expectations_cover_every_bundled_example():
    bundled = {p.relative_to(EXAMPLES).with_suffix("").as_posix() for p in EXAMPLES.rglob("*.toml")}
    assert bundled == set(EXPECTED_ERRORS) == set(FACTS)


@pytest.mark.parametrize("example", sorted(EXPECTED_ERRORS))
def test_example_verdict_matches_reference(example: str, ctx: Context):
    report = validate(EXAMPLES / f"{example}.toml", ctx)
    assert rules(report.errors) == EXPECTED_ERRORS[example], [e.message for e in report.errors]
    assert report.valid is (not EXPECTED_ERRORS[example])
    mode, model, steps, gpus = FACTS[example]
    assert (report.mode, report.model_name, report.max_steps, report.gpu_count) == (mode, model, steps, gpus)
    assert report.schema_check == "snapshot" and report.schema_commit == "559b44772e471d1538537b8805cc77f3824a5e64"
    assert "shipped" in report.schema_source and report.fallback_from is None


def test_example_facts_env_ids_wandb_and_deployment(ctx: Context):
    rt = validate(EXAMPLES / "basic/reverse-text/rl.toml", ctx)
    assert rt.env_ids == ["reverse-text"] and rt.eval_env_ids == [] and rt.wandb_project == "reverse-text"
    assert rt.deployment_type == "single_node" and "1 train + 1 inference" in rt.gpu_count_detail
    hendrycks = validate(EXAMPLES / "basic/hendrycks-sanity/rl.toml", ctx)
    assert hendrycks.env_ids == ["math-env"] and hendrycks.eval_env_ids == ["aime24"]
    # §3.3: 4 inference GPUs, NCCL, no explicit data_parallel_size -> the world-size gap warning
    assert "nccl_world_size" in rules(hendrycks.warnings)
    glm = validate(EXAMPLES / "advanced/glm-4.5-air/swe.toml", ctx)
    assert glm.deployment_type == "multi_node" and glm.env_ids == ["scaleswe"]
    assert "launcher_local" in rules(glm.warnings)  # [slurm]
    assert any("Gradient clipping" in w.message for w in glm.warnings)  # §9.2 "swe warns": full_offload
    sft = validate(EXAMPLES / "basic/reverse-text/sft.toml", ctx)
    assert sft.env_ids == [] and sft.eval_env_ids == ["reverse-text"] and sft.wandb_project is None
    assert "sft_dataset" in rules(sft.warnings)  # an HF dataset name, not a path on a volume
    on_volume = validate(write_toml(ctx, "v.toml", '[data]\nname = "/volume/datasets/reverse"\n'), ctx)
    assert on_volume.valid and "sft_dataset" not in rules(on_volume.warnings)
    fake = validate(write_toml(ctx, "f.toml", '[data]\ntype = "fake"\n'), ctx)
    assert "sft_dataset" not in rules(fake.warnings)


def test_list_examples_reports_hosted_fitness(ctx: Context):
    listed = list_examples(ListExamplesInput(detail=True), ctx)
    by_id = {e.id: e for e in listed.examples}
    assert set(by_id) == set(EXPECTED_ERRORS) and listed.count == len(by_id)
    assert by_id["advanced/glm-5.2/swe"].hosted_ok is False
    assert "disaggregated" in by_id["advanced/glm-5.2/swe"].hosted_reason
    math = by_id["advanced/qwen3-30b-a3b/math"]
    assert math.hosted_ok and "multi-node" in math.hosted_reason
    assert by_id["basic/reverse-text/rl"].description and "Qwen3-0.6B" in by_id["basic/reverse-text/rl"].description
    assert Path(by_id["basic/wordle/sft"].path).is_file()
    sft_only = list_examples(ListExamplesInput(mode="sft"), ctx)
    assert {e.id for e in sft_only.examples} == {"basic/reverse-text/sft", "basic/wordle/sft"}
    assert all(e.path is None and e.description is None for e in sft_only.examples)  # compact unless detail


# -- reading and mode -------------------------------------------------------------------


def test_missing_file_and_invalid_toml(tmp_path: Path, ctx: Context):
    missing = validate_config(ValidateConfigInput(config_path="nope.toml"), ctx)
    assert isinstance(missing, ToolError) and missing.code == "config_not_found" and "mf_list_examples" in missing.fix
    bad = tmp_path / "bad.toml"
    bad.write_text("max_steps = 20\n[model]\nname = \n")
    err = validate_config(ValidateConfigInput(config_path=str(bad)), ctx)
    assert isinstance(err, ToolError) and err.code == "invalid_toml"
    assert err.fields and err.fields[0].path.endswith("bad.toml:3:8"), err.fields


def test_mode_sniff_and_forcing(tmp_path: Path, ctx: Context):
    sft = validate(EXAMPLES / "basic/wordle/sft.toml", ctx)
    assert sft.mode == "sft" and "[data]" in sft.mode_reason
    forced = validate(EXAMPLES / "basic/wordle/sft.toml", ctx, mode="rl")
    assert forced.mode == "rl" and "would dispatch this file as SFT" in forced.mode_reason
    assert forced.errors[0].path == "trainer" and "required" in forced.errors[0].message  # RL needs [trainer]
    as_sft = validate(EXAMPLES / "basic/reverse-text/rl.toml", ctx, mode="sft")
    assert as_sft.mode == "sft" and {"trainer", "orchestrator"} <= {e.path for e in as_sft.errors}  # not SFT keys
    # [data] next to [trainer] is RL (the CLI sniff), and RL has no [data]
    both = mutated(tmp_path, "basic/reverse-text/rl", lambda d: d.update({"data": {"name": "x/y"}}))
    report = validate(both, ctx)
    assert report.mode == "rl" and [e.path for e in report.errors] == ["data"]


# -- negative cases (§9.3 and the CLI's local checks) -----------------------------------


def _set(path: str, value: Any) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        *parents, leaf = path.split(".")
        node = doc
        for part in parents:
            if part not in node:
                node[part] = tomlkit.table()
            node = node[part]
        node[leaf] = value
    return edit


def _drop(path: str) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        *parents, leaf = path.split(".")
        node = doc
        for part in parents:
            node = node[part]
        del node[leaf]
    return edit


def _chain(*edits: Callable[[Any], None]) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        for one in edits:
            one(doc)
    return edit


RT, WORDLE, HENDRYCKS, WORDLE_SFT, QWEN_MATH = (
    "basic/reverse-text/rl", "basic/wordle/rl", "basic/hendrycks-sanity/rl", "basic/wordle/sft",
    "advanced/qwen3-30b-a3b/math")
_RL = "prime_rl.configs.rl.RLConfig."
_EXTRA = "schema:additionalProperties"

#: (case id, example, edit, rule expected as the first ERROR, text expected in its message). Rules
#: of prime-rl's validators are named after the validator they mirror (tools.configs.RULES).
NEGATIVE: list[tuple[str, str, Callable[[Any], None], str, str]] = [
    ("gpus_exceed_node", RT, _chain(_set("deployment.num_train_gpus", 4), _set("deployment.num_infer_gpus", 5)),
     "prime_rl.configs.rl.SingleNodeDeploymentConfig.validate_gpu_count",
     "Total GPU count (9 = 4 train + 5 infer) exceeds gpus_per_node (8)."),
    ("infer_not_divisible_by_tp", RT, _chain(_set("deployment.num_infer_gpus", 3),
                                             _set("inference.vllm.tensor_parallel_size", 2)),
     _RL + "auto_setup_deployment", "divisible by the tensor parallel size"),
    ("batch_not_divisible", RT, _set("orchestrator.batch_size", 100),
     "prime_rl.configs.orchestrator.OrchestratorConfig.resolve_batching",
     "must be divisible by the number of samples per problem"),
    ("batch_and_token_batch", RT, _set("orchestrator.token_batch_size", 4096),
     "prime_rl.configs.orchestrator.OrchestratorConfig.resolve_batching",
     "exactly one of batch_size or token_batch_size"),
    ("toml_files", RT, _set("toml_files", ["base.toml"]), _EXTRA, "compose files on the command line"),
    ("rollouts_per_example", RT, _set("orchestrator.rollouts_per_example", 16), _EXTRA, "orchestrator.group_size"),
    ("old_train_env", RT, _set("orchestrator.train.env", tomlkit.aot()), _EXTRA, "[[orchestrator.train.source]]"),
    ("sampling_max_tokens", RT, _set("orchestrator.train.sampling.max_tokens", 128), _EXTRA, "max_completion_tokens"),
    ("optimizer_lion", RT, _set("trainer.optim.type", "lion"), "schema:discriminator",
     "'lion' is not one of 'sgd', 'adamw', 'muon', 'sign_sgd'"),
    ("missing_trainer", WORDLE, _drop("trainer"), "schema:required", "'trainer' is required"),
    ("trainer_ckpt_only", RT, _chain(_drop("ckpt"), _set("trainer.ckpt.interval", 10)),
     _RL + "validate_shared_configs", "Trainer checkpoint config is specified, but orchestrator"),
    ("resume_step_and_dir", RT, _chain(_set("resume.step", 5), _set("resume.dir", "outputs/x/step_5")),
     "prime_rl.configs.shared.ResumeConfig.validate_step_xor_dir", "mutually exclusive"),
    ("wandb_offline", RT, _set("monitors.wandb.offline", True), "prime_rl.configs.rl.SharedWandbConfig."
     "validate_not_offline", "offline = true is not supported"),
    ("protected_env_var", RT, _set("env_vars.CUDA_VISIBLE_DEVICES", "0"),
     "prime_rl.configs.shared.reject_protected_env_vars", "['CUDA_VISIBLE_DEVICES']"),
    ("k8s_table", RT, _set("k8s.namespace", "x"), "k8s", "[k8s] is not supported for hosted runs"),
    ("clean_true", RT, _set("clean", True), "clean", "clean = true is unsupported for hosted runs"),
    ("disaggregated", QWEN_MATH, _set("inference.deployment.type", "disaggregated"), "disaggregated_inference",
     '"disaggregated" is unsupported for hosted runs'),
    ("no_inference", RT, _drop("inference"), "rl_needs_inference", "Hosted RL runs need inference GPUs"),
    ("zero_infer_gpus", RT, _set("deployment.num_infer_gpus", 0), "rl_needs_inference", "need inference GPUs"),
    ("multi_node_zero_infer_nodes_with_inference", QWEN_MATH, _set("deployment.num_infer_nodes", 0),
     _RL + "validate_deployment", "Cannot configure inference with num_infer_nodes = 0"),
    ("shared_vs_trainer_model", RT, _set("trainer.model.name", "Qwen/Qwen3-0.6B"),
     _RL + "auto_setup_shared_configs", "'trainer.model.name'"),
    ("inference_model_differs", HENDRYCKS, _chain(_drop("model"), _set("inference.vllm.model", "a/b"),
                                                  _set("orchestrator.model.name", "c/d"),
                                                  _set("trainer.model.name", "c/d")),
     _RL + "validate_shared_configs", "Inference model name (a/b) and orchestrator model name (c/d)"),
    ("trainer_seq_len_short", HENDRYCKS, _set("trainer.model.seq_len", 4096), _RL + "validate_shared_configs",
     "Trainer model seq_len (4096) must be >= orchestrator seq_len (8192)"),
    ("retired_model_string", RT, _chain(_drop("model"), _set("model", "Qwen/Qwen3-0.6B")), "retired_lora_shape",
     "retired shared-LoRA"),
    ("retired_env_array", RT, _set("env", [{"id": "reverse-text"}]), "retired_lora_shape", "[[env]]"),
    ("image_tag_not_string", RT, _set("image_tag", 5), "cli_option_type", "image_tag must be a string"),
    ("volume_size_without_volume", RT, _set("volume_size", "500Gi"), "cli_option_type", "set volume too"),
    ("name_with_escape", RT, _set("name", "run\x1b[2J"), "displayed_text", "U+001B (escape) at position 4"),
    ("gpu_type_with_bidi_override", RT, _set("gpu_type", "H100\u202e"), "displayed_text", "right-to-left override"),
    ("source_ref_refs", RT, _set("source_ref", "refs/heads/main"), "source_ref", "refs/ names are not accepted"),
    ("source_ref_dotdot", RT, _set("source_ref", "feature..x"), "source_ref", "not a valid git ref"),
    ("eval_without_source", RT, _set("orchestrator.eval.interval", 10),
     "prime_rl.configs.orchestrator.EvalConfig.validate_non_empty_sources",
     "EvalConfig must define at least one source"),
    ("lora_with_nccl", "basic/alphabet-sort/rl", _set("weight_broadcast.type", "nccl"),
     _RL + "auto_setup_weight_broadcast", "LoRA training is not yet supported with in-memory weight broadcast"),
    ("sft_micro_batch", WORDLE_SFT, _set("data.micro_batch_size", 5),
     "prime_rl.configs.sft.BaseDataConfig.validate_batch_size", "Batch size must be divisible by micro batch size"),
    ("multi_node_fsdp_group", QWEN_MATH, _set("deployment.nodes_per_fsdp_group", 3), _RL + "auto_setup_deployment",
     "must be divisible by deployment.nodes_per_fsdp_group (3)"),
    ("renderer_auto_on_a_fine_tune", RT, _set("orchestrator.renderer.name", "auto"),
     "prime_rl.configs.orchestrator.OrchestratorConfig.validate_renderer_auto_resolves", "MODEL_RENDERER_MAP"),
    ("unknown_top_level_key", RT, _set("my_extra", 1), _EXTRA, "unknown key 'my_extra'"),
    ("lr_not_a_number", RT, _set("trainer.optim.lr", float("nan")), "finite_number", "is not a finite number"),
    ("step_cap_negative", RT, _set("max_steps", -1), "step_cap", "before its first step"),
    ("step_cap_absurd", RT, _set("max_steps", 10**23), "step_cap", "more steps than any run takes"),
]


@pytest.mark.parametrize("case, example, edit, rule, text", NEGATIVE, ids=[c[0] for c in NEGATIVE])
def test_negative_case(case, example, edit, rule, text, tmp_path: Path, ctx: Context):
    report = validate(mutated(tmp_path, example, edit), ctx)
    assert not report.valid
    first = report.errors[0]
    assert first.rule == rule, [(e.rule, e.message) for e in report.errors]
    assert text in first.message and first.fix, first


def test_every_error_rule_of_our_own_has_a_negative_case():
    """Each error rule of the file and hosted scopes is proven to fire by a case in this file (the
    validator mirrors are checked against the real schema by tests/test_schema_conformance.py)."""
    covered = {case[3] for case in NEGATIVE} | {"env_file", "unsupported_secret", "secret_value"}
    assert {r.id for r in RULES if r.severity == "error" and r.scope != "validator"} <= covered


def test_accepted_mutations_stay_valid(tmp_path: Path, ctx: Context):
    """§9.3 accepted cases: max_model_len = "None"; fake trainer data without inference; and values
    pydantic's lax mode converts (a count as a string, a whole float, a boolean as "yes")."""
    none_string = validate(mutated(tmp_path, RT, _set("inference.vllm.max_model_len", "None"), "a.toml"), ctx)
    assert none_string.valid, none_string.errors
    fake = validate(mutated(tmp_path, RT, _chain(_drop("inference"), _set("trainer.data.fake.batch_size", 2)),
                            "b.toml"), ctx)
    assert fake.valid and fake.gpu_count == 1, fake.errors
    lax = validate(mutated(tmp_path, RT, _chain(_set("deployment.num_train_gpus", "1"), _set("max_steps", "20"),
                                                _set("orchestrator.batch_size", 128.0),
                                                _set("trainer.model.impl", "auto"),
                                                _set("ckpt.keep_last", "2")), "c.toml"), ctx)
    assert lax.valid, lax.errors


def test_advice_beyond_the_schema_is_a_warning(tmp_path: Path, ctx: Context):
    report = validate(mutated(tmp_path, RT, _chain(_set("output_dir", "/shared/outputs"), _set("run.dir", "x"))), ctx)
    assert report.valid, report.errors
    assert {"launcher_local"} <= rules(report.warnings)
    capless = validate(mutated(tmp_path, RT, _drop("max_steps"), "capless.toml"), ctx)
    assert capless.valid and "no_max_steps" in rules(capless.warnings) and capless.max_steps is None


def test_unknown_deployment_type(tmp_path: Path, ctx: Context):
    report = validate(mutated(tmp_path, RT, _set("deployment.type", "cluster")), ctx)
    assert report.errors[0].rule == "schema:discriminator" and report.gpu_count is None
    assert "unknown deployment.type" in report.gpu_count_detail


# -- secrets: by name, never by value ---------------------------------------------------

FAKE_HF = "hf_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000"  # fake token shape, not a real token


def test_secret_value_in_toml_reported_by_location_only(tmp_path: Path, ctx: Context):
    canary = "canary-not-a-real-key-0123456789"  # fake
    path = mutated(tmp_path, RT, _chain(_set("env_vars.OPENAI_API_KEY", canary),
                                        _set("monitors.wandb.tags", ["ok", FAKE_HF])))
    result = validate(path, ctx)
    hits = {e.path: e for e in result.errors if e.rule == "secret_value"}
    assert set(hits) == {"env_vars.OPENAI_API_KEY", "monitors.wandb.tags[1]"}
    assert "Hugging Face token" in hits["monitors.wandb.tags[1]"].message
    dumped = result.model_dump_json()
    assert canary not in dumped and FAKE_HF not in dumped
    via_registry = call_tool("mf_validate_config", {"config_path": str(path)}, ctx)
    assert canary not in via_registry.model_dump_json() and FAKE_HF not in via_registry.model_dump_json()


def test_env_files_names_only(tmp_path: Path, ctx: Context):
    wandb_value = "fake-wandb-value-0123456789abcdef"  # fake
    (tmp_path / "good.env").write_text(f"WANDB_API_KEY={wandb_value}\n# comment\n")
    (tmp_path / "bad.env").write_text("OPENAI_API_KEY=fake-openai-value-0123456789\n")
    good = validate(mutated(tmp_path, RT, _set("env_files", ["good.env"]), "good.toml"), ctx)
    assert good.valid and good.secret_names == ["WANDB_API_KEY"]
    assert wandb_value not in good.model_dump_json()
    bad = validate(mutated(tmp_path, RT, _set("env_file", "bad.env"), "bad.toml"), ctx)
    unsupported = [e for e in bad.errors if e.rule == "unsupported_secret"]
    assert unsupported and "OPENAI_API_KEY" in unsupported[0].message and "fake-openai" not in bad.model_dump_json()
    missing = validate(mutated(tmp_path, RT, _set("env_files", ["absent.env"]), "missing.toml"), ctx)
    assert "env_file" in rules(missing.errors)
    wrong_type = validate(mutated(tmp_path, RT, _set("env_files", 3), "typed.toml"), ctx)
    assert "env_file" in rules(wrong_type.errors)


# -- prepare_config ---------------------------------------------------------------------


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prepare(ctx: Context, **kw) -> Any:
    return prepare_config(PrepareConfigInput(**kw), ctx)


def test_prepare_keeps_comments_and_drops_launcher_keys(tmp_path: Path, ctx: Context):
    source = EXAMPLES / "advanced/glm-4.5-air/swe.toml"
    before = (sha(source), source.stat().st_mtime_ns)
    (tmp_path / "out").mkdir()
    result = prepare(ctx, example="advanced/glm-4.5-air/swe", dest="out/glm.toml", gpu_type="H200_141GB",
                     max_steps=10, name="glm-smoke")
    assert not isinstance(result, ToolError), result
    dest = tmp_path / "out" / "glm.toml"
    assert result.path == str(dest) and result.sha256 == sha(dest) and result.size_bytes == dest.stat().st_size
    text = dest.read_text()
    assert "# Redirect compile/JIT caches to node-local /tmp" in text  # comments kept
    lines = text.splitlines()
    at = lines.index("[env_vars]")
    assert lines[at - 1].startswith("# slow/contended shared-FS caches")  # new keys not wedged under its comment
    assert lines.index('name = "glm-smoke"') < next(i for i, line in enumerate(lines) if "# Redirect" in line)
    assert "# --- Orchestrator ---" in text
    parsed, original = tomllib.loads(text), tomllib.loads(source.read_text())
    assert "slurm" not in parsed
    expected = {k: v for k, v in original.items() if k != "slurm"}
    expected.update(max_steps=10, gpu_type="H200_141GB", name="glm-smoke")
    assert parsed == expected  # nothing else changed, types kept
    assert list(parsed)[:4] == ["max_steps", "seq_len", "gpu_type", "name"]  # top-level keys stay top-level
    assert {(c.path, c.action) for c in result.changes} == {
        ("slurm", "removed"), ("gpu_type", "added"), ("max_steps", "set"), ("name", "added")}
    assert result.validation.valid and result.validation.max_steps == 10
    assert "launcher_local" not in rules(result.validation.warnings)
    assert (sha(source), source.stat().st_mtime_ns) == before  # source untouched


def test_prepare_sets_deployment_and_keeps_dtypes(tmp_path: Path, ctx: Context):
    source = EXAMPLES / "basic/reverse-text/rl.toml"
    before = sha(source)
    result = prepare(ctx, example="basic/reverse-text/rl", dest=str(tmp_path / "rt.toml"), num_train_gpus=2,
                     num_infer_gpus=2)
    text = (tmp_path / "rt.toml").read_text()
    assert "lr = 3e-6" in text and "# Checkpoint at the end of training" in text
    parsed = tomllib.loads(text)
    assert parsed["deployment"] == {"num_train_gpus": 2, "num_infer_gpus": 2}
    assert parsed["trainer"]["optim"]["lr"] == 3e-6 and isinstance(parsed["max_steps"], int)
    assert result.validation.gpu_count == 4 and result.mode == "rl"
    assert sha(source) == before


def test_prepare_drops_output_dir_run_dir_and_clean(tmp_path: Path, ctx: Context):
    src = mutated(tmp_path, RT, _chain(_set("output_dir", "/shared/outputs"), _set("run.dir", "x"),
                                       _set("run.name", "keep-me"), _set("clean", True), _set("slurm.job_name", "j")),
                  "src.toml")
    before = sha(src)
    result = prepare(ctx, example=str(src), dest="prepared.toml")
    parsed = tomllib.loads((tmp_path / "prepared.toml").read_text())
    assert not {"output_dir", "clean", "slurm"} & parsed.keys() and parsed["run"] == {"name": "keep-me"}
    assert {c.path for c in result.changes if c.action == "removed"} == {"output_dir", "clean", "slurm", "run.dir"}
    assert result.validation.valid and sha(src) == before and result.source == str(src)


def test_prepare_max_steps_updates_sub_configs(tmp_path: Path, ctx: Context):
    src = mutated(tmp_path, RT, _chain(_drop("max_steps"), _set("trainer.max_steps", 50),
                                       _set("orchestrator.max_steps", 50)), "sub.toml")
    result = prepare(ctx, example=str(src), dest="capped.toml", max_steps=7)
    parsed = tomllib.loads((tmp_path / "capped.toml").read_text())
    assert parsed["max_steps"] == parsed["trainer"]["max_steps"] == parsed["orchestrator"]["max_steps"] == 7
    assert result.validation.valid, result.validation.errors


def test_prepare_refuses_existing_dest(tmp_path: Path, ctx: Context):
    dest = tmp_path / "taken.toml"
    dest.write_text("# mine\n")
    err = prepare(ctx, example="basic/wordle/sft", dest=str(dest))
    assert isinstance(err, ToolError) and err.code == "dest_exists" and "new dest" in err.fix
    assert dest.read_text() == "# mine\n"


def test_prepare_errors_leave_no_file(tmp_path: Path, ctx: Context):
    cases = [
        (dict(example="advanced/qwen3-30b-a3b/math", dest="a.toml", num_train_gpus=2), "bad_arguments"),
        (dict(example="basic/nope/rl", dest="b.toml"), "config_not_found"),
        (dict(example="basic/wordle/sft", dest="c.txt"), "bad_arguments"),
    ]
    broken = tmp_path / "broken.toml"
    broken.write_text("[model\nname = 1\n")
    cases.append((dict(example=str(broken), dest="d.toml"), "invalid_toml"))
    before = set(tmp_path.iterdir())
    for kwargs, code in cases:
        err = prepare(ctx, **kwargs)
        assert isinstance(err, ToolError) and err.code == code, (kwargs, err)
    assert set(tmp_path.iterdir()) == before  # no dest, no temp file


def test_write_new_file_never_clobbers_a_file_that_appeared(tmp_path: Path):
    """The race after the early exists() check: os.link refuses, the temp file is removed."""
    dest = tmp_path / "x.toml"
    dest.write_text("theirs\n")
    with pytest.raises(ToolFailure) as caught:
        write_new_file(dest, b"ours\n")
    assert caught.value.error.code == "dest_exists"
    assert dest.read_text() == "theirs\n" and [p.name for p in tmp_path.iterdir()] == ["x.toml"]
    (tmp_path / "new").mkdir()
    write_new_file(tmp_path / "new" / "y.toml", b"ours\n")
    assert (tmp_path / "new" / "y.toml").read_bytes() == b"ours\n" and len(list((tmp_path / "new").iterdir())) == 1


def test_prepare_write_failure_is_a_tool_error(tmp_path: Path, ctx: Context):
    (tmp_path / "afile").write_text("not a folder")
    err = prepare(ctx, example="basic/wordle/sft", dest="/proc/x.toml")  # an existing folder nobody writes into
    assert isinstance(err, ToolError) and err.code == "write_failed"
    nested = prepare(ctx, example="basic/wordle/sft", dest="afile/sub/x.toml")
    assert isinstance(nested, ToolError) and nested.code == "bad_arguments"
    assert (tmp_path / "afile").read_text() == "not a folder"


def test_prepare_via_registry_schema(tmp_path: Path, ctx: Context):
    result = call_tool("mf_prepare_config", json.dumps({"example": "basic/reverse-text/sft", "dest": "s.toml",
                                                        "max_steps": 5}), ctx)
    assert not isinstance(result, ToolError), result
    assert result.mode == "sft" and result.validation.max_steps == 5
    # hosted SFT is trainer-only: the online-eval blocks and the inference GPU are dropped, the rest kept
    removed = {c.path for c in result.changes if c.action == "removed"}
    assert {"eval", "inference", "deployment.num_infer_gpus"} <= removed
    assert result.validation.valid and result.validation.gpu_count == 1
    assert "sft_online_eval" not in rules(result.validation.warnings)  # nothing left to set aside
    assert "[data]" in (tmp_path / "s.toml").read_text()
    bad = call_tool("mf_prepare_config", {"example": "basic/reverse-text/sft", "dest": "t.toml", "num_train_gpus": 0},
                    ctx)
    assert isinstance(bad, ToolError) and bad.code == "bad_arguments" and not (tmp_path / "t.toml").exists()


def test_report_stays_within_the_output_budget(tmp_path: Path, ctx: Context):
    def many_unknown_keys(doc: Any) -> None:
        for i in range(200):
            doc["orchestrator"][f"unknown_{i}"] = i
    report = validate(mutated(tmp_path, RT, many_unknown_keys), ctx)
    assert not report.valid and report.truncated and "of 200 errors" in report.narrow_hint and report.omitted > 0
    assert len(report.model_dump_json()) <= 8000 and report.errors and report.narrow_hint


def test_a_folder_and_a_byte_order_mark(tmp_path: Path, ctx: Context):
    folder = validate_config(ValidateConfigInput(config_path=str(tmp_path)), ctx)
    assert isinstance(folder, ToolError) and folder.code == "bad_arguments" and "is a folder" in folder.message
    assert [f.path for f in folder.fields] == ["config_path"] and "not a folder" in folder.fix
    shutil.copy(EXAMPLES / "basic/reverse-text/rl.toml", tmp_path / "rl.toml")
    holding = validate_config(ValidateConfigInput(config_path=str(tmp_path)), ctx)  # the fix names the file to pass
    assert holding.code == "bad_arguments" and f"e.g. {tmp_path / 'rl.toml'}" in holding.fix, holding.fix
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + (EXAMPLES / "basic/reverse-text/rl.toml").read_bytes())
    assert validate(bom, ctx).valid


def test_a_folder_given_as_a_config_suggests_only_a_prime_rl_config_in_it_or_a_bundled_example(tmp_path: Path,
                                                                                                  ctx: Context):
    (tmp_path / "a-stray.toml").write_text("[tool.black]\nline-length = 100\n")  # sorts first: not a prime-rl config
    (tmp_path / "b-broken.toml").write_text("[model\n")
    stray = validate_config(ValidateConfigInput(config_path=str(tmp_path)), ctx)
    assert isinstance(stray, ToolError) and stray.code == "bad_arguments"
    assert "a-stray" not in stray.fix and "b-broken" not in stray.fix and "not a prime-rl config" in stray.fix
    example = re.search(r"a bundled example id such as (\S+):", stray.fix)
    assert example and validate(example[1], ctx).valid, stray.fix  # the id it names exists and validates
    shutil.copy(EXAMPLES / "basic/reverse-text/rl.toml", tmp_path / "c-run.toml")
    holding = validate_config(ValidateConfigInput(config_path=str(tmp_path)), ctx)
    named = re.search(r"e\.g\. (\S+) \(a prime-rl config in that folder\)", holding.fix)
    assert named and named[1] == str(tmp_path / "c-run.toml") and validate(Path(named[1]), ctx).valid, holding.fix


def test_an_example_id_can_be_validated(ctx: Context):
    report = validate_config(ValidateConfigInput(config_path="basic/reverse-text/sft"), ctx)
    assert report.config_path.endswith("basic/reverse-text/sft.toml") and report.valid
    assert "sft_online_eval" in rules(report.warnings)
