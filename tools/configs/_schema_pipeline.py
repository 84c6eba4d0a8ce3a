"""The hosted pipeline: what ``prime train validate`` / ``prime train run`` (prime 0.18.0) do
around the schema, shared by the real and the snapshot back-ends.

Both back-ends provide one primitive, ``validate(table) -> PassResult`` (``RLConfig`` /
``SFTConfig`` on one table); :func:`run_pipeline` calls it the way the CLI and its schema
worker do (``prime_cli/commands/rl.py`` and ``prime_cli/utils/training_schema_worker.py``,
described in docs/validation.md):

1. ``cli``: the CLI-only top-level keys are dropped (``env_file``, ``env_files``, ``image_tag``,
   ``gpu_type``, ``volume``, ``volume_size``, ``source_ref``, ``type``) and ``name``; under
   ``[orchestrator]`` the deprecated keys are dropped or translated, each with a warning
   (``trajectory_strategy``/``trajectoryStrategy``, ``buffer``; ``eval.eval_base_model``
   becomes ``eval.skip_first_step`` with the opposite value, unless that is set).
2. the worker: a truthy ``[k8s]`` is refused (an empty one is dropped); RL sets aside
   ``orchestrator.train.source`` and ``orchestrator.eval`` (environment plugins), SFT sets aside
   ``eval``, ``inference`` and ``weight_broadcast`` (hosted SFT is trainer-only); a multi_node
   deployment without ``[slurm]`` gets ``slurm = {}``;
3. ``schema``: validate that table;
4. ``hosted`` (RL): ``clean = true``, disaggregated inference, and a single-node run with no
   inference GPUs and no fake data are refused;
5. ``deferred``: the set-aside blocks are put back without their ``source`` lists and
   validated again; errors inside them count, except a validator of the block itself;
6. ``run_start`` (not part of ``prime train validate``): RL, the full table with the sources
   kept, which is what the platform validates when the run starts; SFT with online-eval blocks,
   the full table with them kept, which is what the platform validates on submission (``prime
   train run`` skips local validation for such a file). A taskset the interpreter
   does not have cannot be checked: only its own settings are skipped (the real back-end's
   worker stands in for it), and a note names it.

The first failing stage ends the pipeline, as the worker stops at its first exception.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tools.configs._facts import CLI_ONLY_KEYS, SFT_ONLINE_EVAL_KEYS
from tools.configs._rules import RULE_BY_ID, hosted_problem
from tools.configs._schema_findings import Finding, Mode, PassResult
from tools.configs._schema_prepass import copy_tree

Validate = Callable[[dict[str, Any]], PassResult]


def hosted_config(raw: dict[str, Any]) -> tuple[dict[str, Any], list[Finding]]:
    """The config ``prime train`` 0.18.0 ships (``_hosted_config``): ``raw`` without the CLI-only
    top-level keys, with the deprecated ``[orchestrator]`` keys dropped or translated, and the
    CLI's warnings about them as findings (stage ``cli``). A copy: ``raw`` is not changed, and
    changing the result changes nothing in ``raw``; ``name`` is kept (it is shipped). Planning
    sends this (with the step cap applied)."""
    config = {k: copy_tree(v) for k, v in raw.items() if k not in CLI_ONLY_KEYS}
    findings: list[Finding] = []
    orchestrator = config.get("orchestrator")
    if isinstance(orchestrator, dict):
        findings += _deprecated_keys(orchestrator)
    if "type" in raw:
        findings.append(_cli("cli_type_key", ("type",), "type is no longer used by prime train (it drops it with a "
                                                        "warning): remove it"))
    return config, findings


def cli_config(raw: dict[str, Any]) -> tuple[dict[str, Any], list[Finding]]:
    """The table the CLI hands to its schema worker (``_schema_input(_hosted_config(raw))``:
    :func:`hosted_config` without ``name``) and the CLI's warnings. ``raw`` is not changed."""
    config, findings = hosted_config(raw)
    config.pop("name", None)
    return config, findings


def _cli(rule: str, loc: tuple[str | int, ...], message: str) -> Finding:
    return Finding(loc, message, rule, severity="warning", stage="cli", kind="rule", source=RULE_BY_ID[rule].source)


def _deprecated_keys(orchestrator: dict[str, Any]) -> list[Finding]:
    """prime_cli/commands/rl.py _remove_deprecated_config_keys, on ``[orchestrator]`` in place."""
    out = []
    removed = [k for k in ("trajectory_strategy", "trajectoryStrategy") if k in orchestrator]
    for key in removed:
        orchestrator.pop(key)
    if removed:
        out.append(_cli("deprecated_key", ("orchestrator", removed[0]),
                        "orchestrator.trajectory_strategy is deprecated and ignored: prime train drops it (so do "
                        "these tools); remove it"))
    if "buffer" in orchestrator:
        orchestrator.pop("buffer")
        out.append(_cli("deprecated_key", ("orchestrator", "buffer"),
                        "[orchestrator.buffer] is deprecated and ignored: the difficulty-filtering buffer was removed "
                        "from the trainer (use [orchestrator.train.source.curriculum]); prime train drops it (so do "
                        "these tools)"))
    evaluation = orchestrator.get("eval")
    if isinstance(evaluation, dict) and "eval_base_model" in evaluation:
        legacy = evaluation.pop("eval_base_model")
        if "skip_first_step" in evaluation:
            kept = _shown(evaluation["skip_first_step"])
            out.append(_cli("deprecated_key", ("orchestrator", "eval", "eval_base_model"),
                            "orchestrator.eval.eval_base_model is deprecated and ignored because "
                            f"orchestrator.eval.skip_first_step is also set: the new key wins (skip_first_step = "
                            f"{kept} is sent); remove eval_base_model"))
        else:
            translated = (not legacy) if isinstance(legacy, bool) else legacy
            evaluation["skip_first_step"] = translated
            shown = _shown(translated)
            out.append(_cli("deprecated_key", ("orchestrator", "eval", "eval_base_model"),
                            "orchestrator.eval.eval_base_model is deprecated: prime-rl renamed it to skip_first_step "
                            "with the opposite meaning (eval_base_model = false is skip_first_step = true); prime "
                            f"train sends skip_first_step = {shown}, and so do these tools. Write skip_first_step = "
                            f"{shown} instead"))
    return out


def _shown(value: Any) -> str:
    """A translated value as TOML text (booleans lower case; anything else by type only, since
    it is not a boolean the schema will refuse it and the value itself need not be repeated)."""
    return str(value).lower() if isinstance(value, bool) else f"<the {type(value).__name__} given>"


def run_pipeline(raw: dict[str, Any], mode: Mode, validate: Validate, *, run_start: bool = True,
                 hosted_rules: bool = True) -> list[Finding]:
    """The findings of the whole hosted pipeline for the parsed TOML ``raw`` in ``mode``:
    the errors of the first failing stage (first one first), then warnings and notes of the
    stages that ran. ``validate`` is the back-end's schema pass; ``hosted_rules=False``
    leaves out the hosted rejections (to measure the schema alone)."""
    config, findings = cli_config(raw)
    errors, later = _worker_stages(config, mode, validate, run_start, hosted_rules)
    return errors + findings + later


def _worker_stages(config: dict[str, Any], mode: Mode, validate: Validate, run_start: bool,
                   hosted_rules: bool) -> tuple[list[Finding], list[Finding]]:
    data = copy_tree(config)
    if data.pop("k8s", None):
        return [Finding(("k8s",), "[k8s] is not supported for hosted runs: Platform manages deployment settings. "
                        "Remove the [k8s] table.", "k8s", stage="hosted", kind="hosted",
                        source=RULE_BY_ID["k8s"].source)], []
    deferred: dict[str, Any] = {}
    if mode == "rl":
        orchestrator = data.get("orchestrator") or {}
        if not isinstance(orchestrator, dict):
            return [_exception("orchestrator must be a table")], []
        train = orchestrator.get("train")
        if isinstance(train, dict) and "source" in train:
            deferred["train_source"] = train.pop("source")
        if "eval" in orchestrator:
            deferred["eval"] = orchestrator.pop("eval")
    else:
        deferred = {key: data.pop(key) for key in SFT_ONLINE_EVAL_KEYS if key in data}
    deployment = data.get("deployment") or {}
    if not isinstance(deployment, dict):
        return [_exception("deployment must be a table")], []
    if deployment.get("type") == "multi_node" and "slurm" not in data:
        data["slurm"] = {}
    notes: list[Finding] = []
    main = validate(copy_tree(data))
    if main.exception is not None:
        return [_exception(main.exception)], []
    if main.errors:
        return main.errors, []
    notes += [Finding((), w, "schema:warning", severity="warning", stage="schema", kind="warning")
              for w in main.warnings]
    if mode == "rl" and hosted_rules:
        rejection = hosted_problem(main.resolved or {})
        if rejection is not None:
            return [rejection], notes
    problems = _deferred_problems(data, deferred, mode, validate)
    if problems:
        return problems, notes
    if mode == "sft" and deferred:
        keys = ", ".join(f"[{k}]" for k in deferred)
        notes.append(Finding((next(iter(deferred)),),
                             f"{keys} set aside: hosted SFT runs are trainer-only, the platform starts no online "
                             "evals. prime train validate checks these blocks' settings (not their sources); prime "
                             "train run skips local validation for such a config and the platform validates it on "
                             "submission (checked here as it does: SFTConfig with the blocks kept).",
                             "sft_online_eval", severity="warning", stage="deferred", kind="rule",
                             source=RULE_BY_ID["sft_online_eval"].source))
        if run_start:  # what the platform validates on submission: SFTConfig with the blocks and their sources
            full = copy_tree(data)
            full.update(copy_tree(deferred))
            result = validate(full)
            stopped = _full_check(result, notes, ON_SUBMISSION)
            if stopped:
                return stopped, notes
    if mode == "rl" and run_start and deferred:
        full = copy_tree(data)
        orchestrator = full.setdefault("orchestrator", {})
        if "train_source" in deferred:
            orchestrator.setdefault("train", {})["source"] = copy_tree(deferred["train_source"])
        if "eval" in deferred:
            orchestrator["eval"] = copy_tree(deferred["eval"])
        result = validate(full)
        stopped = _full_check(result, notes, AT_RUN_START)
        if stopped:
            return stopped, notes
    return [], notes


#: What the findings of the full checks end with: the RL run start, the SFT submission.
AT_RUN_START = " (checked when the run starts: prime train validate sets environment sources aside)"
ON_SUBMISSION = " (checked when the run is submitted: prime train validate sets the online-eval blocks aside)"


def _full_check(result: PassResult, notes: list[Finding], when: str) -> list[Finding]:
    """The errors of a full check (the config with what the worker set aside), each marked with
    ``when``; the remarks, and what could not be checked, added to ``notes``."""
    notes += result.remarks
    if result.skipped:  # judged with stand-ins for the environments whose taskset is not installed
        notes.append(Finding((), "taskset packages not installed in this interpreter ("
                             + "; ".join(result.skipped) + "): their own settings went unchecked, every other "
                             "check of the environment sources ran. The platform checks the tasksets' own "
                             "settings when the run starts", "run_start:taskset_unavailable",
                             severity="note", stage="run_start", kind="exception"))
    if result.exception is not None and result.exception.startswith("ModuleNotFoundError"):
        notes.append(Finding((), "environment sources not checked here: " + result.exception
                             + " (the platform checks them when the run starts)", "run_start:unavailable",
                             severity="note", stage="run_start", kind="exception"))
        return []
    if result.exception is not None:
        return [_marked(_exception(result.exception), when)]
    return [_marked(f, when) for f in result.errors]


def _deferred_problems(data: dict[str, Any], deferred: dict[str, Any], mode: Mode,
                       validate: Validate) -> list[Finding]:
    """prime_cli/utils/training_schema_worker.py check_deferred_settings."""
    if mode == "sft":
        blocks = {key: deferred[key] for key in deferred}
    else:
        blocks = {"orchestrator.eval": deferred["eval"]} if "eval" in deferred else {}
    if not blocks:
        return []
    probe = copy_tree(data)
    for path, block in blocks.items():
        *parents, name = path.split(".")
        target = probe
        for parent in parents:
            target = target.setdefault(parent, {})
        target[name] = ({k: copy_tree(v) for k, v in block.items() if k != "source"} if isinstance(block, dict)
                        else copy_tree(block))
    result = validate(probe)
    if result.exception is not None:
        return []
    prefixes = [tuple(path.split(".")) for path in blocks]
    return [Finding(f.loc, f.message, f.rule, stage="deferred", kind=f.kind, source=f.source)
            for f in result.errors if any(_in_block(f.loc, f.kind, p) for p in prefixes)]


def _in_block(loc: tuple[str | int, ...], kind: str, block: tuple[str, ...]) -> bool:
    """training_schema_worker.deferred_block_error: an error inside a set-aside block, other
    than a validator of the block itself (it may need the removed sources) or its sources."""
    if loc[:len(block)] != block:
        return False
    if len(loc) == len(block):
        return kind not in ("value_error", "assertion_error")
    return loc[len(block)] != "source"


def _exception(message: str) -> Finding:
    return Finding((), message, "schema:exception", stage="schema", kind="exception",
                   source="prime 0.18.0 prime_cli/utils/training_schema_worker.py main")


def _marked(f: Finding, when: str) -> Finding:
    return Finding(f.loc, f.message + when, f.rule, stage="run_start", kind=f.kind, source=f.source)
