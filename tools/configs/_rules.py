"""Every validation rule, in one table (:data:`RULES`), and the two ways rules are applied.

A :class:`Rule` row names the rule (``id``, the ``rule`` of each issue it raises), its severity,
the modes it applies to, what it mirrors or why it exists (``source``), and its ``scope``:

- ``file``: checked here on the parsed TOML by :func:`run_file_rules`, whatever the schema
  back-end: what ``prime train`` 0.18.0 checks before anything else (``source`` names the CLI
  function), the guardrails (secrets), and advice beyond the schema (always a warning);
- ``cli``: raised by the hosted pipeline's CLI stage (deprecated keys translated as ``prime
  train`` does: ``tools/configs/_schema_pipeline.py`` ``cli_config``);
- ``hosted``: the hosted worker's own rejections (prime 0.18.0
  ``prime_cli/utils/training_schema_worker.py``), checked by the pipeline on the validated
  config with :func:`hosted_problem`, by every back-end;
- ``validator``: one prime-rl model validator, mirrored by a function of the ``_mirror_*``
  modules (its id is the validator's name, e.g.
  ``prime_rl.configs.trainer.ModelConfig.validate_cp``); the snapshot back-end applies them with
  :func:`run_validators` the way pydantic runs them. The real back-end runs the validators
  themselves.

What the JSON Schema says (unknown keys, types, bounds, literals) is not a rule: the snapshot
says it (``schema:*`` rule ids) or the real schema does (``pydantic:*``). Every validator of the
shipped schema is mirrored, or listed in :data:`NOT_RAISING` / :data:`NOT_MIRRORED` /
:data:`IN_SCHEMA` with the reason (``tests/test_schema_rules.py`` checks it against the snapshot).
Add a rule: a check and a row below; a ``file``/``cli``/``hosted`` rule also gets a row in
references/configs.md (a test keeps the two equal).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tools.configs import _mirror_orchestrator, _mirror_rl, _mirror_sft, _mirror_trainer  # noqa: F401 (registers)
from tools.configs._facts import CLI_OPTIONS, Config, Mode, max_steps_of
from tools.configs._mirror_base import MIRRORS, Invalid, Node, source_of
from tools.configs._schema_findings import Finding
from tools.configs._schema_index import SchemaIndex
from tools.configs._toml import toml_disagreement
from tools.core import MAX_STEPS
from tools.guardrails.secret_detection import (
    FORWARDABLE,
    credential_tokens,
    env_file_git_warning,
    scan_for_secrets,
    toml_env_files,
)
from tools.guardrails.text import display_problem

Severity = Literal["error", "warning"]
Scope = Literal["file", "cli", "hosted", "validator"]
#: A file rule's finding: (dotted key path, message).
FileFinding = tuple[str, str]


@dataclass(frozen=True)
class Rule:
    """One rule: ``id``, ``severity``, the modes it applies to, ``scope`` (see the module
    docstring), ``source`` (the prime / prime-rl file and function it mirrors, or why it
    exists), a one-line ``summary``, the ``fix`` a person can apply, and ``check`` (``file``:
    ``Config -> [(path, message)]``; ``hosted``: the validated config -> message or None;
    ``validator``: the mirror; ``cli``: None, the pipeline raises it)."""

    id: str
    severity: Severity
    modes: tuple[Mode, ...]
    scope: Scope
    source: str
    summary: str
    fix: str = ""
    check: Callable[..., Any] | None = None


# --------------------------------------------------------------------------------------
# File rules: what prime train checks itself, the guardrails, advice
# --------------------------------------------------------------------------------------


def _retired_lora_shape(c: Config) -> Iterator[FileFinding]:
    if isinstance(c.data.get("model"), str):
        yield "model", ('Top-level `model = "..."` is the retired shared-LoRA format; `prime train` refuses it. '
                        'Use a [model] table: [model] name = "...".')
    if isinstance(c.data.get("env"), list):
        yield "env", ("Top-level [[env]] is the retired shared-LoRA format; `prime train` refuses it. Use "
                      "[[orchestrator.train.source]] with env.taskset.id (start from mf_list_examples).")


def _cli_option_type(c: Config) -> Iterator[FileFinding]:
    for key in CLI_OPTIONS:
        value = c.data.get(key)
        if value is not None and not isinstance(value, str):
            form = 'a string like "500Gi" or "2Ti"' if key == "volume_size" else "a string"
            yield key, f"{key} must be {form}, got {type(value).__name__} (prime train exits on it)."
    if c.data.get("volume_size") is not None and not c.data.get("volume"):
        yield "volume_size", "volume_size is only used to create a volume: set volume too, or remove volume_size."


#: Top-level strings the plan summary and the approval screen show: the run name and the CLI options.
DISPLAYED_KEYS = ("name", *CLI_OPTIONS)


def _displayed_text(c: Config) -> Iterator[FileFinding]:
    for key in DISPLAYED_KEYS:
        value = c.data.get(key)
        if isinstance(value, str) and (problem := display_problem(value)):
            yield key, f"{key} {problem} (value not shown). Remove it: use letters, digits and punctuation only."


_SOURCE_REF = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._/-]{0,199}\Z")


def source_ref_problem(ref: str) -> str | None:
    """Why ``ref`` cannot be a prime-rl source ref (prime CLI 0.18.0 ``_source_ref_error``), or None."""
    if (not _SOURCE_REF.match(ref) or ".." in ref or "//" in ref or "/." in ref or ref.endswith(("/", "."))
            or any(part.endswith(".lock") for part in ref.split("/"))):
        return f"{ref!r} is not a valid git ref (branches, tags and commit shas only)."
    if ref.startswith(("refs/", "pull/")):
        return f"{ref!r}: pull-request and refs/ names are not accepted; use a branch, tag or commit sha."
    return None


def _source_ref(c: Config) -> Iterator[FileFinding]:
    ref = c.data.get("source_ref")
    if isinstance(ref, str) and (problem := source_ref_problem(ref)):
        yield "source_ref", problem


def _finite_numbers(c: Config) -> Iterator[FileFinding]:
    def walk(value: Any, path: str) -> Iterator[FileFinding]:
        if isinstance(value, float) and not math.isfinite(value):
            yield path, (f"{path} = {value} is not a finite number: the config reaches the platform as JSON, which has "
                         "no nan or inf (a number beyond 1.8e308, such as 1e309, reads as inf). Set a finite value.")
        elif isinstance(value, Mapping):
            for key, item in value.items():
                yield from walk(item, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield from walk(item, f"{path}[{index}]")

    yield from walk(c.data, "")


def _env_file(c: Config) -> Iterator[FileFinding]:
    yield from c.env_file_vars[1]


def _unsupported_secret(c: Config) -> Iterator[FileFinding]:
    other = [n for n in c.env_file_vars[0] if n not in FORWARDABLE]
    if other:
        yield "env_files", (f"Only {' and '.join(sorted(FORWARDABLE))} can be forwarded to a hosted run; the env "
                            f"file(s) also set: {', '.join(other)}. `prime train` exits on this: remove those lines "
                            "or use another env file.")


def _secret_value(c: Config) -> Iterator[FileFinding]:
    hits = scan_for_secrets(c.data, root="", known_values=c.known_values, check_key_names=True)
    for hit in hits:
        yield hit.location, (f"Looks like {hit.kind} (value not shown). Remove it from the TOML: secrets travel "
                             "by name (WANDB_API_KEY / HF_TOKEN in the environment or an env file).")
    name = c.data.get("name")
    if isinstance(name, str) and "name" not in {h.location for h in hits} and credential_tokens(name):
        yield "name", ("The run name looks like a credential (a long random token; value not shown): it is sent to "
                       "the platform, shown in the dashboard and recorded. Name the run with words.")


def _env_file_in_git(c: Config) -> Iterator[FileFinding]:
    for env_path in toml_env_files(c.data, c.path):
        if warning := env_file_git_warning(env_path):
            yield "env_files", warning


def _toml_reading(c: Config) -> Iterator[FileFinding]:
    if c.text is not None:
        yield from toml_disagreement(c.text)


#: Where hosted SFT finds datasets: the run's volume, mounted read-only at /volume.
_VOLUME_DATASET = re.compile(r"\A(/volume/|datasets/)")


def _sft_dataset(c: Config) -> Iterator[FileFinding]:
    if c.get("data.type") == "fake":
        return
    name = c.get("data.name") or "PrimeIntellect/Reverse-Text-SFT"
    if isinstance(name, str) and not _VOLUME_DATASET.match(name):
        yield "data.name", (f"data.name {name!r} is not a path on a volume. Hosted SFT reads datasets from the run's "
                            "volume (mounted read-only at /volume: data.name = \"/volume/datasets/<name>\" or "
                            "\"datasets/<name>\"); without a volume only fake data works (prime 0.18.0 `train --sft` "
                            "help). Put the dataset on a volume and plan with volume=<name>.")


def _launcher_local(c: Config) -> Iterator[FileFinding]:
    for path in ("slurm", "output_dir", "run.dir", "dry_run"):
        if c.has(path):
            yield path, (f"{path} is for local/SLURM launches; the platform owns placement and storage. "
                         "mf_prepare_config drops it; remove it.")


def _nccl_world_size(c: Config) -> Iterator[FileFinding]:
    auto_nccl = c.get("weight_broadcast.type") is None and not c.has("trainer.model.lora")
    if not (c.rl and c.single_node and c.has_inference and (auto_nccl or c.get("weight_broadcast.type") == "nccl")):
        return
    tp = c.int("inference.vllm.tensor_parallel_size") or 1
    infer = c.gpus("num_infer_gpus")
    if infer > tp and c.get("inference.vllm.data_parallel_size") is None:
        yield "inference.vllm.data_parallel_size", (
            f"NCCL weight broadcast computes its inference world size before data_parallel_size is auto-filled: "
            f"set [inference.vllm] data_parallel_size = {infer // tp} explicitly (as the wordle example does).")


def _no_max_steps(c: Config) -> Iterator[FileFinding]:
    if max_steps_of(c) is None:
        yield "max_steps", "No max_steps: the run has no step cap and bills until stopped. Set max_steps."


def _step_cap(c: Config) -> Iterator[FileFinding]:
    for where in ("max_steps", "trainer.max_steps", "orchestrator.max_steps") if c.rl else ("max_steps",):
        steps = c.int(where)
        if steps is not None and steps < 1:
            yield where, (f"{where} = {steps}: the schema accepts it, but the run would stop before its first step "
                          f"(plan-run's max_steps takes 1 to {MAX_STEPS:,}, the file alike). Set it to 1 or more.")
        elif steps is not None and steps > MAX_STEPS:
            yield where, (f"{where} = {steps:,} is more steps than any run takes (plan-run's max_steps takes 1 to "
                          f"{MAX_STEPS:,}, the file alike): a plan of it would show a cost no one means. Set the "
                          "steps the run should make.")


def _no_train_source(c: Config) -> Iterator[FileFinding]:
    if not c.sources("orchestrator.train.source"):
        yield "orchestrator.train.source", ("No [[orchestrator.train.source]]: the run has no training "
                                            "environment (prime-rl names it no-env). Add one.")


# --------------------------------------------------------------------------------------
# Hosted rules: the schema worker's own rejections, on the validated config
# --------------------------------------------------------------------------------------

_WORKER = "prime 0.18.0 prime_cli/utils/training_schema_worker.py"
_CLI = "prime 0.18.0 prime_cli/commands/rl.py"


def _clean(resolved: Mapping[str, Any]) -> str | None:
    if resolved.get("clean"):
        return "clean = true is unsupported for hosted runs: start a new run instead."
    return None


def _disaggregated(resolved: Mapping[str, Any]) -> str | None:
    inference = resolved.get("inference")
    if isinstance(inference, Mapping) and (inference.get("deployment") or {}).get("type") == "disaggregated":
        return 'inference.deployment type = "disaggregated" is unsupported for hosted runs.'
    return None


def _needs_inference(resolved: Mapping[str, Any]) -> str | None:
    deployment = resolved.get("deployment") or {}
    inference = resolved.get("inference")
    trainer_only = deployment.get("type") == "single_node" and (inference is None
                                                                or deployment.get("num_infer_gpus") == 0)
    if trainer_only and ((resolved.get("trainer") or {}).get("data") or {}).get("fake") is None:
        return ("Hosted RL runs need inference GPUs: set deployment.num_infer_gpus and an [inference] table, or "
                "use fake trainer data (trainer.data.fake) for a trainer-only run.")
    return None


#: Hosted rules checked on the validated RL config, in the worker's order: (rule id, key path reported).
HOSTED_ORDER: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("clean", ("clean",)),
    ("disaggregated_inference", ("inference", "deployment", "type")),
    ("rl_needs_inference", ("deployment", "num_infer_gpus")),
)


# --------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------

_BOTH: tuple[Mode, ...] = ("rl", "sft")
_RL: tuple[Mode, ...] = ("rl",)
_SFT: tuple[Mode, ...] = ("sft",)
_ADVICE = "advice (beyond the schema; never an error)"


def _validator_rows() -> tuple[Rule, ...]:
    rows = []
    for name, fn in MIRRORS.items():
        module = name.split(".")[2] if name.startswith("prime_rl.configs.") else ""
        modes = _RL if module == "rl" else _SFT if module == "sft" else _BOTH
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else f"mirrors {name}"
        rows.append(Rule(name, "error", modes, "validator", source_of(name), summary,
                         "Change the values the message names (prime-rl refuses the combination).", fn))
    return tuple(rows)


#: Every rule: file rules in report order, then the CLI and hosted rules, then the validator mirrors.
RULES: tuple[Rule, ...] = (
    Rule("retired_lora_shape", "error", _BOTH, "file", f"{_CLI} _looks_like_lora",
         "top-level model string or [[env]]", "Use a [model] table and [[orchestrator.train.source]].",
         _retired_lora_shape),
    Rule("cli_option_type", "error", _BOTH, "file", f"{_CLI} _config_string",
         "image_tag/gpu_type/volume/volume_size/source_ref types", "Write the value as a TOML string.",
         _cli_option_type),
    Rule("displayed_text", "error", _BOTH, "file", "guardrail: a person approves what they read",
         "control characters in name/image_tag/gpu_type/volume/volume_size/source_ref",
         "Remove the control character; use letters, digits and punctuation only.", _displayed_text),
    Rule("source_ref", "error", _BOTH, "file", f"{_CLI} _source_ref_error", "git ref form of source_ref",
         "Use a branch, tag or commit sha of prime-rl.", _source_ref),
    Rule("finite_number", "error", _BOTH, "file", "guardrail: the create body is JSON (RFC 8259: no nan, no inf)",
         "nan, inf or a number too large for a float, anywhere", "Set a finite value.", _finite_numbers),
    Rule("env_file", "error", _BOTH, "file", "prime 0.18.0 env-file rules (tools/guardrails/secret_detection.py)",
         "env_file/env_files readable, ${VAR} set", "Fix the env file path or set the variable it references.",
         _env_file),
    Rule("unsupported_secret", "error", _BOTH, "file", f"{_CLI} env files",
         "env files may set only WANDB_API_KEY/HF_TOKEN", "Keep only WANDB_API_KEY / HF_TOKEN in the env files.",
         _unsupported_secret),
    Rule("secret_value", "error", _BOTH, "file", "guardrail: secrets by name, never by value",
         "secret-looking values in the TOML (a run name shaped like a credential too)",
         "Remove the value; forward the secret by name.", _secret_value),
    Rule("env_file_in_git", "warning", _BOTH, "file", "guardrail: secrets by name, never by value",
         "env files tracked by git or not ignored", "Add the env file to .gitignore (and untrack it if git tracks it).",
         _env_file_in_git),
    Rule("toml_reading", "warning", _BOTH, "file", f"{_CLI} _load_toml (the toml package 0.10)",
         "the toml package reads the file differently from tomllib",
         "Rewrite the key so both readers agree (a single-line string; one type per array).", _toml_reading),
    Rule("sft_dataset", "warning", _SFT, "file", "prime 0.18.0 `prime train --sft` help (hosted SFT)",
         "hosted SFT datasets live on a volume", 'Set data.name = "/volume/datasets/<name>" and plan with a volume.',
         _sft_dataset),
    Rule("launcher_local", "warning", _BOTH, "file", _ADVICE, "[slurm], output_dir, run.dir, dry_run (dropped)",
         "Remove the key (mf_prepare_config drops it).", _launcher_local),
    Rule("nccl_world_size", "warning", _RL, "file", _ADVICE, "explicit dp with NCCL on several inference GPUs",
         "Set [inference.vllm] data_parallel_size = num_infer_gpus / tensor_parallel_size.", _nccl_world_size),
    Rule("no_max_steps", "warning", _BOTH, "file", "guardrail: money is visible", "no step cap",
         "Set max_steps.", _no_max_steps),
    Rule("step_cap", "error", _BOTH, "file", "guardrail: money is visible (the bounds of plan-run's max_steps)",
         f"a step cap outside 1..{MAX_STEPS:,}", f"Set max_steps between 1 and {MAX_STEPS:,}.", _step_cap),
    Rule("no_train_source", "warning", _RL, "file", _ADVICE, "RL without a training environment",
         "Add a [[orchestrator.train.source]] with env.taskset.id.", _no_train_source),
    Rule("deprecated_key", "warning", _RL, "cli", f"{_CLI} _remove_deprecated_config_keys",
         "[orchestrator] keys prime train drops or translates", "Use the key the message names."),
    Rule("cli_type_key", "warning", _BOTH, "cli", f"{_CLI} _warn_legacy_full_finetune_type",
         "top-level type is unused", "Remove the top-level type."),
    Rule("k8s", "error", _BOTH, "hosted", f"{_WORKER} normalize", "[k8s] rejected", "Remove the [k8s] table."),
    Rule("clean", "error", _RL, "hosted", f"{_WORKER} reject_unsupported_hosted_settings", "clean = true rejected",
         "Remove clean; start a new run instead.", _clean),
    Rule("disaggregated_inference", "error", _RL, "hosted", f"{_WORKER} reject_unsupported_hosted_settings",
         "disaggregated inference rejected", "Use single_node or multi_node inference.", _disaggregated),
    Rule("rl_needs_inference", "error", _RL, "hosted", f"{_WORKER} reject_unsupported_hosted_settings",
         "inference GPUs unless trainer.data.fake", "Add [inference] and deployment.num_infer_gpus >= 1.",
         _needs_inference),
    Rule("sft_online_eval", "warning", _SFT, "hosted", f"{_WORKER} normalize (SFT_ONLINE_EVAL_KEYS)",
         "SFT [eval]/[inference]/[weight_broadcast] set aside (hosted SFT is trainer-only)",
         "Remove the blocks for a hosted run (mf_prepare_config drops them)."),
    Rule("unknown_plugin_id", "warning", _RL, "file", "advice: verifiers/v1/utils/loaders.py _import_plugin "
         "imports the taskset or harness only when the run starts; the snapshot back-end names an id its commit "
         "does not know (tools/configs/_schema_plugins.py unknown_ids)",
         "a taskset or harness id the snapshot's schema commit knows nothing of",
         "Check the id for a typo (mf_list_examples shows known ones); keep it if it is your own package."),
    *_validator_rows(),
)
RULE_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}


def run_file_rules(c: Config) -> list[Finding]:
    """The findings of every ``file`` rule of ``c.mode`` on the parsed TOML, in table order
    (stage ``file``; dotted paths turned into key paths)."""
    out: list[Finding] = []
    for rule in RULES:
        if rule.scope != "file" or c.mode not in rule.modes or rule.check is None:
            continue
        for where, message in rule.check(c):
            out.append(Finding(parse_path(where), message, rule.id, severity=rule.severity, stage="file",
                               kind="rule", source=rule.source))
    return out


def hosted_problem(resolved: Mapping[str, Any]) -> Finding | None:
    """The first hosted rejection of a validated RL config (``model_dump`` shape), or None."""
    for rule_id, loc in HOSTED_ORDER:
        rule = RULE_BY_ID[rule_id]
        message = rule.check(resolved) if rule.check is not None else None
        if message:
            return Finding(loc, message, rule_id, stage="hosted", kind="hosted", source=rule.source)
    return None


_SEGMENT = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")


def parse_path(path: str) -> tuple[str | int, ...]:
    """``"a.b[0].c"`` -> ``("a", "b", 0, "c")``; ``""`` -> ``()``."""
    return tuple(int(m[1]) if m[1] is not None else m[2] for m in _SEGMENT.finditer(path))


# --------------------------------------------------------------------------------------
# The validator walk (snapshot back-end)
# --------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """Findings of the validator mirrors (in walk order) and the warnings they emitted."""

    findings: list[Finding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def run_validators(resolved: dict[str, Any], fields_set: dict[int, frozenset[str]], index: SchemaIndex,
                   facts: dict[str, Any], error_locs: Sequence[tuple[str | int, ...]]) -> Outcome:
    """Run the validator mirrors over ``resolved`` (defaults filled, from
    :func:`tools.configs._schema_prepass.fill_defaults`) the way pydantic runs validators:
    depth first in field order, a model's validators in the order pydantic runs them, only on
    a model whose fields (and sub-models) all validated, stopping at a model's first failure.
    A model with a schema error inside it (``error_locs``) is not checked, nor are the models
    containing it."""
    outcome = Outcome()
    walker = _Walker(index, fields_set, facts, outcome, [tuple(loc) for loc in error_locs])
    walker.value(resolved, index.root, ())
    return outcome


@dataclass
class _Walker:
    index: SchemaIndex
    fields_set: dict[int, frozenset[str]]
    facts: dict[str, Any]
    outcome: Outcome
    error_locs: list[tuple[str | int, ...]]

    def value(self, value: Any, node: dict[str, Any] | None, loc: tuple[str | int, ...]) -> bool:
        """Check ``value`` and what it contains; False when something in it failed."""
        if node is None:
            return True
        chosen = self.index.select(node, value)
        if chosen is None:
            return True
        if isinstance(value, list) and isinstance(chosen.get("items"), dict):
            results = [self.value(v, chosen["items"], (*loc, i)) for i, v in enumerate(value)]
            return all(results)
        if not isinstance(value, dict):
            return True
        if "x-model" not in chosen:
            extra = chosen.get("additionalProperties")
            if isinstance(extra, dict):
                return all([self.value(v, extra, (*loc, k)) for k, v in value.items()])
            return True
        results = [self.value(value[name], prop, (*loc, name))
                   for name, prop in chosen.get("properties", {}).items() if name in value]
        if not all(results) or any(e[:len(loc)] == loc for e in self.error_locs):
            return False
        view = Node(value, self.fields_set, self.facts, self.outcome.warnings)
        for validator in chosen.get("x-validators", ()):
            mirror = MIRRORS.get(validator)
            if mirror is None:
                continue
            try:
                mirror(view)
            except Invalid as invalid:
                where = loc if invalid.loc is None else invalid.loc
                self.outcome.findings.append(Finding(where, invalid.message, validator, kind=invalid.kind,
                                                     source=source_of(validator)))
                return False
        return True


#: Validators that only fill in values no other validator (nor the hosted rejections) reads.
NOT_RAISING: dict[str, str] = {
    "prime_rl.configs.shared.SlurmConfig.resolve_project_dir": "resolves slurm.project_dir to an absolute path",
    "prime_rl.configs.inference.VllmConfig.auto_resolve_parsers": "picks the tool-call/reasoning parser by model name",
    "prime_rl.configs.inference.InferenceConfig.auto_setup_backend_port": "backend_port = server.port + 100",
    "prime_rl.configs.inference.InferenceConfig.auto_setup_slurm_template": "picks the bundled sbatch template",
    "prime_rl.configs.orchestrator.TrainConfig.resolve_env_defaults": "sources inherit the group's sampling",
    "prime_rl.configs.orchestrator.EvalConfig.resolve_env_defaults": "sources inherit the group's eval settings",
    "prime_rl.configs.orchestrator.OrchestratorConfig.auto_setup_session_headers": "adds the X-Session-ID header",
    "prime_rl.configs.orchestrator.OrchestratorConfig.auto_setup_prime_monitor_name": "names the platform run",
    "prime_rl.configs.orchestrator.OrchestratorConfig.resolve_env_config": "vLLM sampling defaults per source",
    "prime_rl.configs.rl.RLConfig.auto_setup_run_identity": "W&B and platform run names",
    "prime_rl.configs.rl.RLConfig.auto_setup_inference_client": "the orchestrator's inference client URLs",
    "prime_rl.configs.rl.RLConfig.auto_setup_slurm_template": "picks the bundled sbatch template",
    "prime_rl.configs.sft.SFTConfig.auto_setup_run_identity": "run name and W&B run name",
    "prime_rl.configs.sft.SFTConfig.auto_setup_slurm_template": "picks the bundled sbatch template",
}

#: Validators the snapshot cannot mirror, with the reason.
NOT_MIRRORED: dict[str, str] = {
    "renderers.configs.CustomRendererConfig._validate_renderer_fields":
        "imports the custom renderer named by the config (user code)",
}

#: Field validators JSON Schema expresses (in the shipped schema itself).
IN_SCHEMA: dict[str, str] = {
    "prime_rl.configs.shared.reject_protected_env_vars": "propertyNames of every env_vars table",
}

