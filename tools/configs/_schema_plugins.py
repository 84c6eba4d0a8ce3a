"""Keys of an environment source's ``env`` table, for the tasksets the snapshot knows.

When the run starts, verifiers narrows a source's ``env`` to its taskset's classes
(``verifiers.v1.utils.loaders.resolve_env_config``: the env class of the taskset, its taskset
config class, each role's harness by harness id, the runtime by type), all with extra keys
forbidden. The snapshot cannot hold those schemas for every taskset (they are plugins), but
the export records the keys of the tasksets installed where it ran (``metadata.json``,
``plugins``: the four of the bundled basic examples), of the built-in harnesses and of the
runtime types. :func:`env_findings` reports an unknown key in those tables, where and in the
order pydantic does:

An env that names no taskset is checked against the classes verifiers picks then (recorded
under the taskset id ``""``).

1. ``env.taskset`` (and ``env.taskset.task``): narrowed by a before-validator, so its errors end
   the env's validation;
2. a ``harness`` key on ``env`` itself (``EnvConfig._refuse_env_level_harness``): a value error
   on ``env``;
3. per role (in the env class's field order): ``harness`` (narrowed by its id, default
   ``bash``; an id that is not a string, or its errors, end the role's validation), then
   ``runtime`` (an unknown ``type``, or keys not of its type, default the role's default
   runtime type), then the role's own extra keys;
4. the env's extra keys.

Also the shapes verifiers refuses before any key: a taskset, harness or runtime that is not a
table, a taskset id that is not a string. Only the first problem of a source is reported
(pydantic stops the env there, or reports it first). Other values inside these tables are not
checked; an env with an ``id`` (a paired env class) or an unknown taskset is not checked at all.

:func:`unknown_ids` names the taskset and harness ids the schema commit knows nothing of (a
warning each, not an error: private environments exist): not the snapshot's tasksets, not one
verifiers ships (:data:`BUILTIN_TASKSETS`, the harnesses the snapshot records), not one the
commit's own example configs use. Ids compare as verifiers imports them (``owner/name@version``
-> ``name``, ``-`` -> ``_``, lower case). Runtimes are chosen by ``type`` from a closed set, so an
unknown runtime type is already an error above.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

from tools.configs._schema_findings import Finding
from tools.configs._schema_index import SchemaIndex
from tools.configs._schema_prepass import ModelRejected, plugin_table

#: The tasksets verifiers a60a606 ships (``verifiers/v1/tasksets/``: it imports them before any package).
BUILTIN_TASKSETS = ("harbor", "lean", "nemo_gym", "openenv", "textarena")
_EXAMPLES = Path(__file__).resolve().parent / "examples"
_LOADER = "advice: verifiers/v1/utils/loaders.py _import_plugin imports it when the run starts"
SOURCE_MODELS = ("prime_rl.configs.orchestrator.TrainSourceConfig", "prime_rl.configs.orchestrator.EvalSourceConfig")
_RULE = "schema:additionalProperties"


def env_findings(data: Any, index: SchemaIndex, plugins: dict[str, Any],
                 error_locs: list[tuple[str | int, ...]]) -> list[Finding]:
    """The first problem of each environment source in ``data`` (prepared) that has no error
    yet. Raises :class:`tools.configs._schema_prepass.Rejected` for a value verifiers would crash on."""
    out = []
    for loc, table, node in index.models(data):
        if node.get("x-model") not in SOURCE_MODELS or not isinstance(table.get("env"), dict):
            continue
        if any(e[:len(loc)] == loc for e in error_locs):
            continue
        finding = _first_problem((*loc, "env"), table["env"], plugins)
        if finding is not None:
            out.append(finding)
    return out


def _extra(loc: tuple[str | int, ...], table: dict[str, Any], allowed: list[str]) -> Finding | None:
    for key in table:
        if key not in allowed:
            where = Finding(loc, "", "").path
            return Finding((*loc, key), f"unknown key {key!r} in [{where}]: extra keys are not permitted "
                           "(keys of the taskset's environment, checked when the run starts)", _RULE,
                           kind="extra_forbidden")
    return None


def _value_error(loc: tuple[str | int, ...], message: str) -> Finding:
    return Finding(loc, message, "verifiers.v1.utils.loaders.narrow_plugin_field",
                   source="verifiers/v1/utils/loaders.py narrow_plugin_field")


def _first_problem(loc: tuple[str | int, ...], env: dict[str, Any], plugins: dict[str, Any]) -> Finding | None:
    taskset = env.get("taskset")
    if taskset is not None and not isinstance(taskset, dict):
        try:
            taskset = plugin_table(taskset, "env.taskset")
        except ModelRejected as rejected:
            return _value_error(loc, rejected.message)
        if not taskset:  # narrowed to nothing: the field itself then refuses the value
            return Finding((*loc, "taskset"), "env.taskset must be a table", "schema:type", kind="model_type")
    if isinstance(taskset, dict) and taskset.get("id") and not isinstance(taskset["id"], str):
        return _value_error(loc, f"env.taskset.id must be a taskset id (a string), got {taskset['id']!r}")
    taskset_id = taskset.get("id", "") if isinstance(taskset, dict) else ""
    known = plugins.get("tasksets", {}).get(taskset_id) if isinstance(taskset_id, str) else None
    if known is None or env.get("id"):
        return None
    if isinstance(taskset, dict):  # the taskset's declared field task first, then its extra keys
        task = taskset.get("task")
        problem = (_extra((*loc, "taskset", "task"), task, known["task"])
                   if isinstance(task, dict) and known.get("task") is not None else None)
        problem = problem or _extra((*loc, "taskset"), taskset, known["taskset"])
        if problem is not None:
            return problem
    if "harness" in env and "harness" not in known["env"]:
        return Finding(loc, "a harness belongs to a seat: [env.agent.harness] on the single-agent env, "
                       "[env.<role>.harness] on a multi-agent role", "verifiers.v1.configs.env.EnvConfig."
                       "_refuse_env_level_harness", source="verifiers/v1/configs/env.py "
                       "EnvConfig._refuse_env_level_harness")
    for role, spec in known["roles"].items():
        problem = _role_problem((*loc, role), env.get(role), spec, plugins)
        if problem is not None:
            return problem
    return _extra(loc, env, known["env"])


def _role_problem(loc: tuple[str | int, ...], role: Any, spec: dict[str, Any],
                  plugins: dict[str, Any]) -> Finding | None:
    if not isinstance(role, dict):
        return None
    harness = role.get("harness")
    if harness is not None and not isinstance(harness, dict):
        try:
            harness = plugin_table(harness, f"{loc[-1]}.harness")
        except ModelRejected as rejected:
            return _value_error(loc, rejected.message)
    if isinstance(harness, dict):
        if harness.get("id") and not isinstance(harness["id"], str):
            return Finding(loc, f"harness.id needs an id, and none was given (got {harness['id']!r})",
                           "verifiers.v1.utils.loaders.narrow_plugin_field",
                           source="verifiers/v1/utils/loaders.py narrow_plugin_field")
        ident = harness.get("id") or spec.get("harness") or plugins.get("default_harness")
        keys = plugins.get("harnesses", {}).get(ident) if isinstance(ident, str) else None
        if keys is not None:
            problem = _extra((*loc, "harness"), harness, keys)
            if problem is not None:
                return problem
    runtime = role.get("runtime")
    if runtime is not None and not isinstance(runtime, dict):
        return Finding((*loc, "runtime"), f"{loc[-1]}.runtime must be a table", "schema:type", kind="model_type")
    if isinstance(runtime, dict):
        kind = runtime.get("type") or spec.get("runtime")
        runtimes = plugins.get("runtimes", {})
        if "type" in runtime and (not isinstance(kind, str) or kind not in runtimes):
            return Finding((*loc, "runtime"), f"runtime type {kind!r} is not one of {', '.join(sorted(runtimes))}",
                           "schema:discriminator", kind="union_tag_invalid")
        keys = runtimes.get(kind) if isinstance(kind, str) else None
        if keys is not None:
            problem = _extra((*loc, "runtime"), runtime, keys)
            if problem is not None:
                return problem
    return _extra(loc, role, spec["keys"])


def plugin_module(plugin_id: str) -> str:
    """The module verifiers imports for a plugin id (``_import_plugin``): ``owner/name@v`` -> ``name``,
    ``-`` -> ``_``, lower case."""
    return plugin_id.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()


@functools.lru_cache(maxsize=1)
def _example_ids() -> tuple[frozenset[str], frozenset[str]]:
    """(taskset modules, harness modules) the bundled examples of the schema commit name."""
    tasksets: set[str] = set()
    harnesses: set[str] = set()

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            if key in ("taskset", "harness") and isinstance(node.get("id"), str):
                (tasksets if key == "taskset" else harnesses).add(plugin_module(node["id"]))
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)

    for path in _EXAMPLES.rglob("*.toml"):
        walk(tomllib.loads(path.read_text()))
    return frozenset(tasksets), frozenset(harnesses)


def unknown_ids(data: Any, index: SchemaIndex, plugins: dict[str, Any], commit: str) -> list[Finding]:
    """A warning for each taskset or harness id of an environment source in ``data`` that the
    schema commit ``commit`` knows nothing of (see the module docstring), at the id's key path."""
    example_tasksets, example_harnesses = _example_ids()
    tasksets = {plugin_module(t) for t in plugins.get("tasksets", {}) if t} | set(BUILTIN_TASKSETS) | example_tasksets
    harnesses = {plugin_module(h) for h in plugins.get("harnesses", {})} | example_harnesses
    out: list[Finding] = []
    for loc, table, node in index.models(data):
        if node.get("x-model") not in SOURCE_MODELS or not isinstance(table.get("env"), dict):
            continue
        env = table["env"]
        found: list[tuple[tuple[str, ...], str, Any, set[str]]] = [
            (("taskset", "id"), "taskset", env.get("taskset"), tasksets)]
        found += [((role, "harness", "id"), "harness", value.get("harness"), harnesses)
                  for role, value in env.items() if isinstance(value, dict) and role != "taskset"]
        for where, kind, plugin, known in found:
            ident = plugin.get("id") if isinstance(plugin, dict) else None
            if isinstance(ident, str) and ident and plugin_module(ident) not in known:
                out.append(Finding((*loc, "env", *where), (
                    f"{kind} {ident!r} is not known to prime-rl {commit[:7]} (not shipped with verifiers, recorded "
                    f"in the snapshot or used by prime-rl's examples): its settings are not checked here, and a "
                    f"typo would fail only when the run starts"), "unknown_plugin_id", severity="warning",
                    stage="run_start", kind="rule", source=_LOADER))
    return out
