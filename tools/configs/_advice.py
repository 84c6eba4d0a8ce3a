"""What a person can do about a finding: the fix, and for an unknown key, the key meant.

An unknown key (``extra_forbidden``, from either back-end) is matched against the keys valid at
its place in the shipped schema (``difflib``: ``orchestrator.batchsize`` -> ``batch_size``) and
against every place the schema declares a key of that name (``orchestrator.lr`` -> it belongs in
``[trainer.optim]``); keys older prime-rl versions or the hosted format used get the replacement
named (:data:`REPLACED`), ``eval_base_model`` with its opposite meaning. Other findings get a
fix by kind (a type, a bound, a literal), or the fix of the rule that raised them
(:data:`tools.configs._rules.RULES`); a cross-field rejection names the keys the validator
compared and their values (``_compared``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from tools.configs._compared import annotate, homes
from tools.configs._facts import Mode
from tools.configs._rules import RULE_BY_ID
from tools.configs._schema_findings import Finding, dotted
from tools.configs._schema_snapshot import snapshot_schema

#: Keys of older prime-rl versions and of the retired hosted format -> what replaced them.
#: Matched on the whole key path, then on the key alone.
REPLACED: dict[str, str] = {
    "orchestrator.rollouts_per_example": "orchestrator.group_size (the old hosted key)",
    "orchestrator.max_inflight_rollouts": "orchestrator.concurrency.max_inflight",
    "orchestrator.oversampling_factor": "nothing: it was removed from prime-rl",
    "orchestrator.max_tokens": "orchestrator.train.sampling.max_completion_tokens",
    "orchestrator.sampling": "[orchestrator.train.sampling] (max_tokens is now max_completion_tokens)",
    "orchestrator.train.sampling.max_tokens": "orchestrator.train.sampling.max_completion_tokens",
    "orchestrator.train.env": "[[orchestrator.train.source]] with env.taskset.id (the retired hosted shape)",
    "orchestrator.eval.env": "[[orchestrator.eval.source]] with env.taskset.id",
    "eval": "[orchestrator.eval] (RL evals live under the orchestrator; prime train does not move a top-level "
            "[eval])",
    "buffer": "nothing: the difficulty-filtering buffer was removed (use [orchestrator.train.source.curriculum]); "
              "prime train drops only [orchestrator.buffer]",
    "trajectory_strategy": "nothing: it was removed; prime train drops it only under [orchestrator]",
    "toml_files": "nothing: removed from prime-rl (2026-03-02); compose files on the command line "
                  "(`@ base.toml @ overlay.toml`) or merge them into one TOML",
    "eval_base_model": "skip_first_step under [orchestrator.eval], with the OPPOSITE meaning: eval_base_model = "
                       "true is skip_first_step = false (prime train translates it only at "
                       "orchestrator.eval.eval_base_model)",
}


def advise(finding: Finding, raw: Mapping[str, Any], mode: Mode) -> tuple[str, str | None]:
    """(message, fix) for ``finding`` on the parsed TOML ``raw``: the message with the key meant
    added for an unknown key, and a fix that starts with a verb (None when there is nothing to
    do: notes)."""
    if finding.kind == "extra_forbidden" and finding.loc and isinstance(finding.loc[-1], str):
        return _unknown_key(finding, raw, mode)
    rule = RULE_BY_ID.get(finding.rule)
    if rule is not None and rule.fix:
        if rule.scope == "validator":  # a cross-field rejection: name the keys compared and their values
            return annotate(finding, raw, mode, finding.message, rule.fix)
        return finding.message, rule.fix
    if finding.rule.startswith("backend:prime_"):
        return finding.message, ("Fix what the message names (prime on PATH, PRIME_API_KEY, uv and GitHub for its "
                                 "schema venv), or set the schema argument to real or snapshot.")
    if finding.stage == "backend":
        return finding.message, ("Point MODEL_FACTORY_SCHEMA_PYTHON or prime_rl_dir at a working prime-rl, or pass "
                                 "the schema argument snapshot to check against the shipped schema only.")
    if finding.severity == "note":
        return finding.message, None
    return annotate(finding, raw, mode, finding.message, _fix_by_kind(finding))


def _fix_by_kind(f: Finding) -> str:
    where = f.path or "the file"
    kind = f.kind
    if kind == "missing":
        return f"Add {where}."
    if kind.endswith(("_type", "_parsing")) or kind in ("schema_type", "model_type", "schema_anyOf"):
        return f"Give {where} a value of the type the message names."
    if kind.startswith(("greater_than", "less_than")) or kind in ("schema_minimum", "schema_maximum",
                                                                  "schema_exclusiveMinimum", "schema_exclusiveMaximum",
                                                                  "too_short", "too_long", "schema_minItems"):
        return f"Change {where} to a value within the bound the message names."
    if kind in ("literal_error", "enum", "schema_enum", "schema_const", "union_tag_invalid", "union_tag_not_found"):
        return f"Use one of the values the message lists for {where}."
    if kind == "exception":
        return "Fix the value the message names; the schema's validation stops on it."
    return f"Change the settings the message names at {where} (prime-rl refuses them as they are)."


def _unknown_key(f: Finding, raw: Mapping[str, Any], mode: Mode) -> tuple[str, str]:
    *parent, key = f.loc
    assert isinstance(key, str)
    place = f"[{dotted(parent)}]" if parent else "the top level"
    replaced = REPLACED.get(_template(f.loc)) or REPLACED.get(key)
    if replaced is not None:
        return (f"{f.message}. {f.path} is not a prime-rl field (any more): use {replaced}.",
                f"Replace {f.path} with {replaced.split(' (')[0]}.")
    valid = _keys_at(tuple(parent), raw, mode)
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.75)
    elsewhere = [p for p in homes(mode).get(key, ()) if p != _template(tuple(parent))]
    hints = []
    if close:
        hints.append(f"did you mean {close[0]!r}?")
    if elsewhere:
        hints.append(f"{key!r} belongs in {', '.join(f'[{p}]' if p else 'the top level' for p in elsewhere[:3])}")
    message = f"{f.message}" + (f" ({'; '.join(hints)})" if hints else "")
    if close:
        return message, f"Rename {key} to {close[0]} in {place}."
    if elsewhere:
        target = f"[{elsewhere[0]}]" if elsewhere[0] else "the top level"
        return message, f"Move {key} from {place} to {target}."
    return message, f"Remove {key} from {place} (it is not a field there)."


def _template(loc: tuple[str | int, ...]) -> str:
    """A key path with list indexes as ``[]`` (``orchestrator.train.source[].name``)."""
    return dotted(tuple("[]" if isinstance(p, int) else p for p in loc)).replace(".[]", "[]")


def _keys_at(parent: tuple[str | int, ...], raw: Mapping[str, Any], mode: Mode) -> list[str]:
    """The keys the schema declares for the table at ``parent`` (union members resolved
    against ``raw``)."""
    schema = snapshot_schema(mode)
    node = schema.node_at(parent, dict(raw))
    if node is None:
        return []
    return list(schema.index.properties(node))
