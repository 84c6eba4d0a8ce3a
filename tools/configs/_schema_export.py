"""Make the shipped JSON Schemas of RLConfig and SFTConfig from a prime-rl interpreter.

Two halves:

1. :func:`export_raw` runs ``_schema_export_worker.py`` in an interpreter that has
   ``prime_rl.configs`` (a venv's python, or ``uv run --no-sync python`` in a prime-rl
   checkout) and returns pydantic's schemas with the annotations only the live classes know
   (see that module's docstring).
2. :func:`finalize` turns them into the shipped files, post-processed so that a Draft 2020-12
   validator (``jsonschema``) says what pydantic says wherever JSON Schema can:

   - discriminated unions (``oneOf`` + ``discriminator``, which jsonschema ignores) become an
     ``enum`` on the tag plus one ``if``/``then`` per tag, so an error comes from the chosen
     member only (``x-discriminator`` names the tag property);
   - a ``default_factory`` value becomes the ``default`` (pydantic leaves it out);
   - ``env_vars`` tables get ``propertyNames`` refusing the launcher-managed variables
     (``prime_rl.configs.shared.reject_protected_env_vars``);
   - the ``env`` of an environment source is loosened to "a table": verifiers narrows it to
     the taskset's own config class at run time (a plugin); the keys of the tasksets installed
     where the export ran go to ``metadata.json`` (``plugins``, see ``_schema_plugins``);
     definitions nothing refers to any more are removed;
   - ``title`` keywords are dropped (noise); descriptions, defaults, ``additionalProperties``
     (pydantic's ``extra="forbid"`` at every depth) and the ``x-`` annotations are kept.

   What JSON Schema cannot say (lax coercion, before-validators that reshape input, model
   validators) is done by :mod:`tools.configs._schema_prepass` and :mod:`tools.configs._rules`,
   driven by the ``x-`` annotations.

``scripts/export_schema_snapshot.py`` regenerates the files; ``tests/test_schema_snapshot.py``
checks the shipped files equal a fresh export from ``../shared/fixtures/prime-rl-schema``.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

SNAPSHOT_DIR = Path(__file__).resolve().parent / "schema_snapshot"
WORKER = Path(__file__).resolve().parent / "_schema_export_worker.py"
#: Version of the post-processing below; part of the metadata (a change means: re-export).
FORMAT_VERSION = 1
DIALECT = "https://json-schema.org/draft/2020-12/schema"
_SOURCE_MODELS = ("prime_rl.configs.orchestrator.TrainSourceConfig", "prime_rl.configs.orchestrator.EvalSourceConfig")
_LOOSE_ENV = {
    "type": "object",
    "default": {},
    "description": "The verifiers environment of this source. Its keys are defined by the taskset package "
                   "(a plugin resolved from env.taskset.id when the run starts): the snapshot checks them "
                   "for the tasksets recorded in metadata.json (plugins), the real back-end where the "
                   "taskset is installed.",
    "x-plugin": "verifiers.v1.configs.cli.env.resolve_env_field",
}
#: Schema keywords whose value is one subschema / a list of subschemas / a map of subschemas.
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "propertyNames", "contains")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "$defs", "patternProperties")


class ExportError(RuntimeError):
    """The export interpreter failed or printed something that is not the export."""


def export_raw(command: Sequence[str], *, cwd: Path | None = None, timeout: float = 300.0) -> dict[str, Any]:
    """Run the export worker with ``command`` (e.g. ``[python, "-I", "-B"]`` or
    ``["uv", "run", "--no-sync", "python", "-B"]``) and return its JSON (``rl``, ``sft``,
    ``facts``, ``versions``). The environment is reduced to PATH/HOME/locale (no credentials;
    ``PRIME_LOG_LEVEL`` unset so defaults are the schema's own).

    Raises :class:`ExportError` on a non-zero exit, a timeout or output that is not JSON.
    """
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
           or k.startswith("UV_")}
    try:
        done = subprocess.run([*command, str(WORKER)], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExportError(f"cannot run the export with {' '.join(command)}: {exc}") from None
    if done.returncode != 0:
        raise ExportError(f"export failed ({' '.join(command)}), exit {done.returncode}: {done.stderr[-1500:]}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise ExportError(f"export printed no JSON ({' '.join(command)}): {done.stdout[:300]!r}") from None


def finalize(raw: dict[str, Any], *, commit: str) -> dict[str, bytes]:
    """The shipped files from an :func:`export_raw` result: ``{file name: bytes}`` for
    ``rl.schema.json``, ``sft.schema.json`` and ``metadata.json`` (schema commit, versions,
    facts, how they were made). Deterministic: same input, same bytes (nothing about the
    machine: no paths, no patch version of Python)."""
    facts = raw["facts"]
    files: dict[str, bytes] = {}
    for mode in ("rl", "sft"):
        schema = _post_process(copy.deepcopy(raw[mode]), facts)
        schema = {"$schema": DIALECT, "$id": f"https://model-factory-skill.invalid/prime-rl/{commit}/{mode}.schema.json",
                  **schema}
        files[f"{mode}.schema.json"] = _dump(schema)
    metadata = {
        "schema_commit": commit,
        "repository": "https://github.com/PrimeIntellect-ai/prime-rl",
        "package": "packages/prime-rl-configs",
        "models": {"rl": "prime_rl.configs.rl.RLConfig", "sft": "prime_rl.configs.sft.SFTConfig"},
        "made_from": "RLConfig/SFTConfig of prime-rl-configs at schema_commit, model_json_schema() in the "
                     "interpreter that has them (versions below), post-processed by tools/configs/_schema_export.py",
        "made_by": "scripts/export_schema_snapshot.py --python PYTHON --commit SHA (or --checkout DIR)",
        "format_version": FORMAT_VERSION,
        "dialect": DIALECT,
        "versions": raw["versions"],
        "facts": facts,
        "plugins": raw["plugins"],
    }
    files["metadata.json"] = _dump(metadata)
    return files


def _dump(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=False) + "\n").encode()


# --------------------------------------------------------------------------------------
# Post-processing
# --------------------------------------------------------------------------------------


def _post_process(schema: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    protected = sorted(facts["protected_env_vars"])
    for node in schemas(schema):
        node.pop("title", None)
        if "discriminator" in node and "oneOf" in node:
            _tagged_union(node)
        for prop in node.get("properties", {}).values():
            if "x-default-factory" in prop:
                prop["default"] = prop.pop("x-default-factory")
            if "prime_rl.configs.shared.reject_protected_env_vars" in prop.get("x-field-after", ()):
                prop["propertyNames"] = {"not": {"enum": protected}}
        if node.get("x-model") in _SOURCE_MODELS and "env" in node.get("properties", {}):
            node["properties"]["env"] = copy.deepcopy(_LOOSE_ENV)
    _drop_unreferenced(schema)
    return schema


def _tagged_union(node: dict[str, Any]) -> None:
    """``oneOf`` + ``discriminator`` -> tag enum + one if/then per member (in place)."""
    tag = node["discriminator"]["propertyName"]
    mapping = node["discriminator"]["mapping"]
    members = [m["$ref"] for m in node.pop("oneOf")]
    node.pop("discriminator")
    order = {ref: i for i, ref in enumerate(members)}
    tags = sorted(mapping, key=lambda t: order.get(mapping[t], len(order)))
    node["type"] = "object"
    node["required"] = [tag]
    node["properties"] = {tag: {"enum": tags}}
    node["allOf"] = [{"if": {"properties": {tag: {"const": t}}, "required": [tag]}, "then": {"$ref": mapping[t]}}
                     for t in tags]
    node["x-discriminator"] = tag


def schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every subschema of ``node`` (``node`` first), following the keyword structure (so a
    property called ``title`` or ``default`` is never mistaken for a keyword)."""
    if not isinstance(node, dict):
        return
    yield node
    for key in _ONE:
        if isinstance(node.get(key), dict):
            yield from schemas(node[key])
    for key in _MANY:
        for sub in node.get(key, ()) or ():
            yield from schemas(sub)
    for key in _MAP:
        for sub in (node.get(key) or {}).values():
            yield from schemas(sub)


def _drop_unreferenced(schema: dict[str, Any]) -> None:
    defs = schema.get("$defs", {})
    seen: set[str] = set()
    pending = [schema]
    while pending:
        node = pending.pop()
        for sub in _walk_refs(node):
            name = sub.rsplit("/", 1)[-1]
            if name not in seen and name in defs:
                seen.add(name)
                pending.append(defs[name])
    for name in [n for n in defs if n not in seen]:
        del defs[name]


def _walk_refs(node: dict[str, Any], skip_defs: bool = True) -> Iterator[str]:
    for sub in schemas({k: v for k, v in node.items() if k != "$defs"} if skip_defs else node):
        if isinstance(sub.get("$ref"), str):
            yield sub["$ref"]


def load_snapshot(dest: Path = SNAPSHOT_DIR) -> dict[str, Any]:
    """The shipped files, parsed: ``{"rl": schema, "sft": schema, "metadata": dict}``."""
    return {"rl": json.loads((dest / "rl.schema.json").read_bytes()),
            "sft": json.loads((dest / "sft.schema.json").read_bytes()),
            "metadata": json.loads((dest / "metadata.json").read_bytes())}


def visit(schema: dict[str, Any], fn: Callable[[dict[str, Any]], None]) -> None:
    """Call ``fn`` on every subschema of ``schema`` (definitions included)."""
    for node in schemas(schema):
        fn(node)
