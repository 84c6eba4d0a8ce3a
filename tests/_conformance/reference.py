"""The reference verdict: prime 0.18.0's own code on the fixture's prime-rl.

Two long-lived processes run prime's code unchanged:

1. in the prime 0.18.0 environment, ``_ref_cli.py``: ``toml.load`` (for files), the CLI's
   ``_hosted_config`` + ``_schema_input`` and its mode sniff;
2. in the fixture's schema environment (with the four tasksets), ``_ref_worker.py``: the
   wheel's ``training_schema_worker.normalize`` (its provenance check skipped: it is in
   ``main``, and the fixture's prime-rl is a local copy, not a GitHub install), then for RL
   configs it accepts the full ``RLConfig`` with the environment sources kept, as the platform
   validates when the run starts, and for SFT configs with online-eval blocks the full
   ``SFTConfig`` with them kept, as the platform validates them on submission.

:meth:`Reference.judge` turns their answers into a :class:`RefVerdict`: valid or not, and the
first error as a key path (:func:`tools.configs.key_path`, so union branch labels are
dropped exactly as for our back-ends). The worker's own failures carry no path; the hosted
rejections are assigned the key they are about (:data:`HOSTED_PATHS`), anything else the
whole file. A run-start check that cannot import a taskset the fixture does not have
(``ModuleNotFoundError``) is unknown, and the worker's verdict stands.
"""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.configs import key_path, union_tags

HERE = Path(__file__).resolve().parent
#: Worker messages that are not pydantic errors -> the key path they are about.
HOSTED_PATHS = (
    ("[k8s] is not supported", ("k8s",)),
    ("clean = true is unsupported", ("clean",)),
    ('inference.deployment type = "disaggregated"', ("inference", "deployment", "type")),
    ("Hosted RL runs need inference GPUs", ("deployment", "num_infer_gpus")),
)
_DEFERRED = "Config validation failed:\n"


@dataclass(frozen=True)
class RefVerdict:
    """What prime 0.18.0 + the platform's run-start check say about one config.

    ``stage``: ``cli`` (prime could not read it), ``schema``, ``hosted``, ``deferred``,
    ``run_start``, ``exception`` or ``ok``; ``path``: key path of the first error (``()`` =
    the whole file); ``run_start_unknown``: the run-start check needed a taskset the fixture
    does not have."""

    valid: bool
    mode: str
    stage: str
    path: tuple[str | int, ...] = ()
    message: str = ""
    run_start_unknown: bool = False


class _Process:
    def __init__(self, argv: list[str], ready: bool) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, bufsize=1)
        self.lock = threading.Lock()
        if ready:
            line = self.process.stdout.readline() if self.process.stdout else ""
            if not line or not json.loads(line).get("ready"):
                raise RuntimeError(f"reference process did not start: {argv}")

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps(request, default=str) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("reference process exited")
        return json.loads(line)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Reference:
    """prime 0.18.0's CLI normalization and schema worker, kept running for a batch."""

    def __init__(self, prime_python: Path, schema_python: Path, worker_file: Path) -> None:
        self.cli = _Process([str(prime_python), "-B", str(HERE / "_ref_cli.py")], ready=False)
        self.worker = _Process([str(schema_python), "-B", str(HERE / "_ref_worker.py"), str(worker_file)], ready=True)
        self._next = 0

    def close(self) -> None:
        """Stop both processes."""
        self.cli.close()
        self.worker.close()

    def __enter__(self) -> Reference:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def judge(self, raw: dict[str, Any] | None = None, *, path: Path | None = None, sft: bool = False) -> RefVerdict:
        """The reference verdict for a parsed table ``raw`` or a TOML file ``path`` (read by prime
        with the ``toml`` package); ``sft`` is ``--sft``."""
        self._next += 1
        request: dict[str, Any] = {"id": self._next, "sft": sft}
        request.update({"raw": raw} if raw is not None else {"path": str(path)})
        cli = self.cli.ask(request)
        if "error" in cli:
            return RefVerdict(False, "rl", "cli", (), cli["error"])
        config, mode = cli["config"], cli["mode"]
        answer = self.worker.ask({"id": self._next, "config": config, "mode": mode,
                                  "sft_online_eval_keys": cli["sft_online_eval_keys"]})
        worker = answer["worker"]
        if not worker.get("ok"):
            return _failure(worker, config, mode)
        start = answer.get("run_start")
        if start is None or start.get("ok"):
            return RefVerdict(True, mode, "ok")
        if start.get("exception") == "ModuleNotFoundError":
            return RefVerdict(True, mode, "ok", run_start_unknown=True, message=start.get("message", ""))
        failure = _failure(start, config, mode)
        return RefVerdict(False, mode, "run_start", failure.path, failure.message)


def _failure(outcome: dict[str, Any], config: dict[str, Any], mode: str) -> RefVerdict:
    if "errors" in outcome:
        first = outcome["errors"][0]
        path = key_path(first["loc"], config, first["type"], union_tags())
        return RefVerdict(False, mode, "schema", path, first["msg"])
    message = outcome.get("message", "")
    if message.startswith(_DEFERRED):
        line = message[len(_DEFERRED):].splitlines()[0]
        where, _, text = line.partition(": ")
        loc = [int(p) if p.isdigit() else p for p in where.split(".")] if where else []
        return RefVerdict(False, mode, "deferred", key_path(loc, config, None, union_tags()), text)
    for prefix, loc in HOSTED_PATHS:
        if message.startswith(prefix):
            return RefVerdict(False, mode, "hosted", loc, message)
    return RefVerdict(False, mode, "exception", (), f"{outcome.get('exception')}: {message}")
