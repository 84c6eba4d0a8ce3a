"""Schema worker: validates config tables with prime-rl's own RLConfig/SFTConfig, one per line.

Run by :mod:`tools.configs._schema_real` in a foreign interpreter (``PYTHON -I -B
_schema_worker.py``, or ``uv run --no-sync python -B _schema_worker.py`` in a prime-rl checkout),
never imported by this package (it ships in the wheel as a file). It imports nothing from
this project and keeps to syntax any Python 3 parses, so that a wrong interpreter can still
say what it is. Protocol, one JSON object per line:

- worker -> caller, at once: ``{"hello": {"python": "3.12.1", "executable": ...}}``;
- worker -> caller, after importing prime_rl.configs: ``{"ready": true, "import_seconds": s,
  "versions": {...}, "commit": sha-or-null, "commit_source": ..., "sources": [the files of the
  prime_rl modules imported]}`` or
  ``{"ready": false, "error": "..."}`` (then it exits);
- caller -> worker: ``{"id": n, "mode": "rl"|"sft", "data": {...}, "dump": true}``;
- worker -> caller: ``{"id": n, "errors": [{"loc": [...], "type": ..., "msg": ...}],
  "dump": <model_dump(mode="json")> or null, "warnings": [...], "exception": null or "...",
  "skipped": [...], "seconds": s}``.

A taskset whose package this interpreter does not have would stop the whole validation
(verifiers' ``resolve_env_config`` raises ``ModuleNotFoundError``), switching off every other
check of the sources with it. So the worker wraps ``resolve_env_config``: for such an
environment it puts in its place the generic ``EnvConfig`` with the same env and taskset ids,
built without validation (``model_construct``), and lists the import error in ``skipped``. Only
what needs the package (the taskset's own settings) goes unchecked; names, duplicates,
``agg``, eval sources, intervals and the rest are judged as prime-rl judges them.

Anything else the schema's modules print goes to stderr, never into the protocol. The table is
validated as given: the hosted normalization is the caller's (``_schema_pipeline``).
"""

import json
import os
import re
import sys
import time
import warnings


def _emit(stream, obj):
    stream.write(json.dumps(obj, default=str) + "\n")
    stream.flush()


def commit_of(install):
    """The prime-rl commit recorded in a ``direct_url.json`` of prime-rl-configs (a dict): a VCS
    install's ``vcs_info.commit_id``, or the sha of a GitHub archive of
    packages/prime-rl-configs, as the prime CLI's provenance check reads it; (commit or None,
    where it came from). Also used by the caller to read a venv without starting it."""
    vcs = install.get("vcs_info") or {}
    if vcs.get("commit_id"):
        return vcs["commit_id"], "direct_url.json vcs_info"
    match = re.fullmatch(r"https://github\.com/PrimeIntellect-ai/prime-rl/archive/([0-9a-f]{40})\.tar\.gz",
                         install.get("url", ""))
    if match and install.get("subdirectory") == "packages/prime-rl-configs":
        return match.group(1), "direct_url.json archive"
    return None, install.get("url") or "direct_url.json without a commit"


def _installed_commit():
    """The commit of the installed prime-rl-configs (:func:`commit_of` its direct_url.json)."""
    from importlib import metadata

    try:
        dist = metadata.distribution("prime-rl-configs")
        install = json.loads(dist.read_text("direct_url.json") or "{}")
    except Exception:
        return None, "no direct_url.json"
    return commit_of(install)


def _versions():
    from importlib import metadata

    out = {}
    for name in ("prime-rl-configs", "pydantic", "verifiers", "renderers", "prime-pydantic-config"):
        try:
            out[name] = metadata.version(name)
        except Exception:
            out[name] = None
    return out


_SKIPPED = []  # type: list[str]


def _lenient_tasksets():
    """Wrap verifiers' ``resolve_env_config`` as the module docstring says; nothing when this
    verifiers has no such function."""
    try:
        from verifiers.v1.configs.env import EnvConfig
        from verifiers.v1.configs.taskset import TasksetConfig
        from verifiers.v1.utils import loaders
    except Exception:
        return
    original = loaders.resolve_env_config

    def resolve(data):
        try:
            return original(data)
        except ModuleNotFoundError as exc:
            if isinstance(data, dict):
                env_id = data.get("id") or ""
                taskset = data.get("taskset")
                taskset_id = taskset.get("id", "") if isinstance(taskset, dict) else getattr(taskset, "id", "")
            else:
                env_id = getattr(data, "id", "") or ""
                taskset_id = getattr(getattr(data, "taskset", None), "id", "") or ""
            _SKIPPED.append(str(exc).split(". ")[0])
            return EnvConfig.model_construct(id=env_id, taskset=TasksetConfig.model_construct(id=taskset_id or ""))

    loaders.resolve_env_config = resolve


def _validate(models, request):
    from pydantic import ValidationError

    model = models[request["mode"]]
    started = time.perf_counter()
    del _SKIPPED[:]
    out = {"id": request.get("id"), "errors": [], "dump": None, "warnings": [], "exception": None}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config = model.model_validate(request["data"])
            if request.get("dump"):
                out["dump"] = config.model_dump(mode="json")
        except ValidationError as exc:
            out["errors"] = [{"loc": list(e["loc"]), "type": e["type"], "msg": e["msg"]}
                             for e in exc.errors(include_input=False, include_url=False)]
        except Exception as exc:  # a taskset that is not installed, a validator that crashed
            out["exception"] = "%s: %s" % (type(exc).__name__, exc)
    out["warnings"] = [str(w.message) for w in caught]
    out["skipped"] = sorted(set(_SKIPPED))
    out["seconds"] = time.perf_counter() - started
    return out


def main():
    protocol = sys.stdout
    sys.stdout = sys.stderr  # whatever the schema's modules print stays out of the protocol
    _emit(protocol, {"hello": {"python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable}})
    started = time.perf_counter()
    try:
        warnings.simplefilter("ignore")
        from prime_rl.configs.rl import RLConfig
        from prime_rl.configs.sft import SFTConfig
    except BaseException as exc:
        _emit(protocol, {"ready": False, "error": "%s: %s" % (type(exc).__name__, exc)})
        return 3
    _lenient_tasksets()
    commit, commit_source = _installed_commit()
    sources = sorted(set(getattr(m, "__file__", None) or "" for n, m in list(sys.modules.items())
                         if n == "prime_rl" or n.startswith("prime_rl.")) - {""})
    _emit(protocol, {"ready": True, "import_seconds": time.perf_counter() - started, "versions": _versions(),
                     "commit": commit, "commit_source": commit_source, "pid": os.getpid(), "sources": sources})
    models = {"rl": RLConfig, "sft": SFTConfig}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            _emit(protocol, _validate(models, request))
        except Exception as exc:
            _emit(protocol, {"id": None, "errors": [], "dump": None, "warnings": [],
                             "exception": "worker: %s: %s" % (type(exc).__name__, exc)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
