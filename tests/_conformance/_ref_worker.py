"""Reference, part 2: prime 0.18.0's schema worker, unchanged, on the fixture's prime-rl.

Runs in the fixture's schema environment: ``python _ref_worker.py PATH/training_schema_worker.py``.
The worker file is loaded from the installed prime wheel as a module and its ``normalize``
(everything ``main`` does except the provenance check, which needs a prime-rl installed from
GitHub at the platform's commit) is called per request. Then, for RL configs the worker
accepts, the full ``RLConfig`` with the environment sources kept: what the platform validates
when the run starts; for SFT configs with online-eval blocks (which ``prime train run`` does not
validate locally), the full ``SFTConfig`` with them kept: what the platform validates on
submission (reference/prime-api.md §3.2 step 10, prime-rl.md "Platform validates it on submission").

Request per line: ``{"id", "config", "mode", "sft_online_eval_keys"}``. Answer per line::

    {"id", "worker": {"ok": true} | {"errors": [{loc, type, msg}]} | {"exception": type, "message": str},
     "run_start": null | {"ok": true} | {"errors": [...]} | {"exception": type, "message": str}}
"""

import copy
import importlib.util
import json
import sys
import warnings


def _load(path):
    spec = importlib.util.spec_from_file_location("prime_training_schema_worker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _outcome(fn):
    from pydantic import ValidationError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
        return {"ok": True}
    except ValidationError as exc:
        return {"errors": [{"loc": list(e["loc"]), "type": e["type"], "msg": e["msg"]}
                           for e in exc.errors(include_input=False, include_url=False)]}
    except Exception as exc:
        return {"exception": type(exc).__name__, "message": str(exc)}


def main():
    protocol = sys.stdout
    sys.stdout = sys.stderr
    worker = _load(sys.argv[1])
    from prime_rl.configs.rl import RLConfig
    from prime_rl.configs.sft import SFTConfig

    protocol.write(json.dumps({"ready": True}) + "\n")
    protocol.flush()
    for line in sys.stdin:
        request = json.loads(line)
        payload = {"config": request["config"], "mode": request["mode"], "schema_commit": "reference",
                   "sft_online_eval_keys": request["sft_online_eval_keys"]}
        answer = {"id": request.get("id"), "worker": _outcome(lambda p=payload: worker.normalize(copy.deepcopy(p))),
                  "run_start": None}
        if request["mode"] == "rl" and answer["worker"].get("ok"):
            data = copy.deepcopy(request["config"])
            data.pop("k8s", None)
            if (data.get("deployment") or {}).get("type") == "multi_node" and "slurm" not in data:
                data["slurm"] = {}
            answer["run_start"] = _outcome(lambda d=data: RLConfig.model_validate(d))
        if (request["mode"] == "sft" and answer["worker"].get("ok")
                and any(k in request["config"] for k in request["sft_online_eval_keys"])):
            data = copy.deepcopy(request["config"])
            data.pop("k8s", None)
            if (data.get("deployment") or {}).get("type") == "multi_node" and "slurm" not in data:
                data["slurm"] = {}
            answer["run_start"] = _outcome(lambda d=data: SFTConfig.model_validate(d))
        protocol.write(json.dumps(answer, default=str) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
