"""The real back-end: prime-rl's own RLConfig/SFTConfig, in a Python 3.12 interpreter that has
``prime_rl.configs``, in a subprocess (never imported here).

Where the interpreter comes from (:func:`find_interpreters`, first found wins):

1. an interpreter given by the caller (``python=``) or named by ``MODEL_FACTORY_SCHEMA_PYTHON``;
2. a prime-rl checkout: the ``prime_rl_dir`` argument, ``PRIME_RL_DIR``, or the repository the
   working directory is in when it is a prime-rl checkout (it has
   ``packages/prime-rl-configs``); run the way the checkout runs itself,
   ``uv run --no-sync python`` in it; its schema commit is ``git rev-parse HEAD``;
3. the prime CLI's cached schema environments
   (``$XDG_CACHE_HOME/prime/training-schemas/<key>/bin/python`` with a ``.ready`` marker, most
   recently used first), which ``prime train validate`` builds; their commit is read from the
   installed package's ``direct_url.json``.

A bare interpreter reports the commit of its ``direct_url.json`` when it has one, else
``"unknown"``.

Each interpreter gets one long-lived worker process (``_worker.py``): importing prime-rl costs
seconds (about 5 s here, mostly verifiers), a validation then costs milliseconds. Workers are
kept per interpreter for the life of this process (:func:`close_workers` ends them) and
restarted when one dies, and when the schema it imported is no longer the one on disk: each
check computes the interpreter's :func:`schema_identity` (its commit plus a digest of the
prime-rl config sources in the working tree or the venv, :func:`source_digest`), and a worker
started under another identity, or whose imported ``prime_rl`` files (the worker lists them)
changed since, is replaced, so a long-running process (the MCP server) never judges with the
schema of an earlier checkout. Verdicts are remembered under that identity. The environment
given to a worker holds no credentials (PATH, HOME, locale, temp dir, and for ``uv run`` the
``UV_*`` variables that locate its cache and project environment).

Every failure of the interpreter (not Python 3.12, no ``prime_rl``, exits, hangs past the
timeout, prints something that is not the protocol) raises :class:`RealBackendUnavailable`
with a finding that says what happened and what to do; :func:`tools.configs._schema_backends.check` then
falls back to the snapshot.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.configs._schema_findings import Finding, Mode, PassResult, key_path
from tools.configs._schema_snapshot import union_tags
from tools.configs._schema_worker import commit_of

WORKER = Path(__file__).resolve().parent / "_schema_worker.py"
ENV_PYTHON = "MODEL_FACTORY_SCHEMA_PYTHON"
ENV_CHECKOUT = "PRIME_RL_DIR"
_HEX40 = re.compile(r"[0-9a-f]{40}")
_PASSED_ENV = ("PATH", "HOME", "USERPROFILE", "LANG", "LC_ALL", "TMPDIR", "TEMP", "SYSTEMROOT", "XDG_CACHE_HOME")
_UV_ENV = ("UV_CACHE_DIR", "UV_PROJECT_ENVIRONMENT", "UV_PYTHON_INSTALL_DIR", "UV_TOOL_DIR", "UV_NO_CONFIG")


class RealBackendUnavailable(Exception):
    """The interpreter cannot validate; ``finding`` (stage ``backend``) says why and what to do."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


@dataclass(frozen=True)
class Interpreter:
    """How to start a Python with ``prime_rl.configs``.

    ``command``: argv before the worker script (``[python, "-I", "-B"]`` or
    ``["uv", "run", "--no-sync", "python", "-B"]``); ``cwd``: where to run it (a checkout);
    ``label``: for people (a path); ``commit``/``commit_source``: the schema commit when known
    before starting (a checkout's HEAD, a venv's ``direct_url.json``); ``cacheable``: the commit
    says everything about the schema (false for a checkout with uncommitted changes)."""

    command: tuple[str, ...]
    label: str
    cwd: Path | None = None
    commit: str | None = None
    commit_source: str = ""
    origin: str = "interpreter"
    cacheable: bool = False
    #: Where its prime-rl config sources are (the checkout's packages/prime-rl-configs, the venv's prime_rl).
    source_roots: tuple[Path, ...] = ()

    @classmethod
    def python(cls, path: str | Path, origin: str = "interpreter") -> Interpreter:
        """A bare interpreter (a venv's ``bin/python``), run isolated (``-I -B``) like the prime CLI
        runs its worker; the commit is read from the venv's ``direct_url.json`` when it has one."""
        commit, source = _venv_commit(Path(path))
        prefix = Path(path).parent.parent
        roots = tuple(sorted(prefix.glob("lib/python*/site-packages/prime_rl"))) \
            if (prefix / "pyvenv.cfg").is_file() else ()
        return cls((str(path), "-I", "-B"), str(path), commit=commit, commit_source=source, origin=origin,
                   cacheable=commit is not None, source_roots=roots)

    @classmethod
    def checkout(cls, root: Path, uv: str | None = None) -> Interpreter:
        """A prime-rl checkout, run as ``uv run --no-sync python`` in it; commit = ``git HEAD``
        (not cacheable when tracked files have uncommitted changes)."""
        commit, dirty = _git_head(root)
        source = f"git HEAD of {root}" + (" (with uncommitted changes)" if dirty else "") if commit else ""
        return cls((uv or shutil.which("uv") or "uv", "run", "--no-sync", "python", "-B"),
                   f"uv run --no-sync python in {root}", cwd=root, commit=commit, commit_source=source,
                   origin="checkout", cacheable=commit is not None and not dirty,
                   source_roots=(root / "packages" / "prime-rl-configs",))


#: (size, mtime_ns, ctime_ns) and sha256 of each source file read, so a check re-reads only what changed.
_FILE_DIGESTS: dict[Path, tuple[tuple[int, int, int], str]] = {}
_SOURCE_SUFFIXES = (".py", ".toml")


def source_digest(roots: tuple[Path, ...], files: tuple[Path, ...] = ()) -> str:
    """16 hex digits of a sha256 over the ``*.py``/``*.toml`` files under ``roots`` (caches and
    bytecode left out) and the ``files``, as they are on disk now: paths and contents. A file
    is hashed again only when its size or times changed. Missing roots count as empty."""
    found: set[Path] = set(files)
    for root in roots:
        if root.is_dir():
            found.update(p for p in root.rglob("*") if p.suffix in _SOURCE_SUFFIXES and "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in sorted(found):
        digest.update(str(path).encode() + b"\0" + _file_sha(path).encode() + b"\0")
    return digest.hexdigest()[:16]


def _file_sha(path: Path) -> str:
    try:
        st = path.stat()
        stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        known = _FILE_DIGESTS.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"
    _FILE_DIGESTS[path] = (stamp, sha)
    return sha


def schema_identity(interpreter: Interpreter) -> str:
    """What names the schema ``interpreter`` would import now: its commit (``unknown`` when not
    known) plus :func:`source_digest` of its config sources. A commit moved, a file edited,
    added or removed, gives another identity."""
    return f"{interpreter.commit or 'unknown'}+{source_digest(interpreter.source_roots)}"


def find_interpreters(*, python: str | Path | None = None, prime_rl_dir: str | Path | None = None,
                      env: Mapping[str, str] | None = None, cwd: Path | None = None,
                      home: Path | None = None) -> list[Interpreter]:
    """Candidate interpreters, best first (see the module docstring for the order). Only
    cheap checks here (files exist, git HEAD, a venv's direct_url.json); a validation finds out
    whether one works. ``env``: the environment to read (default ``os.environ``); ``cwd``: where
    to look for a checkout around (default the current folder); ``home``: the home folder of the
    prime CLI's cache (default ``env["HOME"]``, else ``Path.home()``)."""
    env = os.environ if env is None else env
    found: list[Interpreter] = []
    if python is not None:
        found.append(Interpreter.python(python, origin="argument"))
    if env.get(ENV_PYTHON):
        found.append(Interpreter.python(env[ENV_PYTHON], origin=ENV_PYTHON))
    for root in (prime_rl_dir, env.get(ENV_CHECKOUT)):
        if root:
            checkout = _checkout_root(Path(root))
            if checkout is not None:
                found.append(Interpreter.checkout(checkout))
    here = _checkout_root(cwd or Path.cwd(), walk_up=True)
    if here is not None:
        found.append(Interpreter.checkout(here))
    cache_home = Path(env.get("XDG_CACHE_HOME") or (home or Path(env.get("HOME") or Path.home())) / ".cache")
    cache = cache_home / "prime" / "training-schemas"
    venvs = []
    if cache.is_dir():
        for target in cache.iterdir():
            exe = target / "bin" / "python"
            if (target / ".ready").exists() and exe.is_file():
                marker = target / ".last-used" if (target / ".last-used").exists() else target / ".ready"
                venvs.append((marker.stat().st_mtime, exe))
    found += [Interpreter.python(exe, origin="prime CLI schema cache") for _, exe in sorted(venvs, reverse=True)]
    unique: dict[tuple[Any, ...], Interpreter] = {}
    for interpreter in found:
        unique.setdefault((interpreter.command, interpreter.cwd), interpreter)
    return list(unique.values())


def checkout_problem(root: Path) -> Finding | None:
    """Why ``root`` (a ``prime_rl_dir`` argument) is not used, or None when it is a checkout."""
    if _checkout_root(root) is not None:
        return None
    return Finding((), f"real prime-rl schema: {root} is not a prime-rl checkout (no "
                   "packages/prime-rl-configs/pyproject.toml there), so it is not used. Pass the folder of a "
                   "prime-rl clone (git clone https://github.com/PrimeIntellect-ai/prime-rl; uv sync in it).",
                   "backend:not_a_checkout", severity="warning", stage="backend", kind="backend")


def _checkout_root(start: Path, walk_up: bool = False) -> Path | None:
    start = start.expanduser().resolve()
    for folder in [start, *(start.parents if walk_up else ())]:
        if (folder / "packages" / "prime-rl-configs" / "pyproject.toml").is_file():
            return folder
        if walk_up and (folder / ".git").exists():
            return None
    return None


def _git_head(root: Path) -> tuple[str | None, bool]:
    """(``git rev-parse HEAD`` of ``root`` or None, whether tracked files have changes)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None, False
    head = done.stdout.strip()
    if done.returncode != 0 or not _HEX40.fullmatch(head):
        return None, False
    return head, status.returncode != 0 or bool(status.stdout.strip())


def _venv_commit(python: Path) -> tuple[str | None, str]:
    """The prime-rl commit of a venv's installed prime-rl-configs, read from its
    ``direct_url.json`` without starting it (:func:`commit_of`); (None, "") when the interpreter is
    not in a venv or the file says nothing."""
    prefix = python.parent.parent
    if not (prefix / "pyvenv.cfg").is_file():
        return None, ""
    for record in sorted(prefix.glob("lib/python*/site-packages/prime_rl_configs-*.dist-info/direct_url.json")):
        try:
            commit, source = commit_of(json.loads(record.read_text()))
        except (OSError, ValueError, AttributeError):
            continue
        if commit and _HEX40.fullmatch(commit):
            return commit, source
    return None, ""


def _worker_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    base = os.environ if base is None else base
    keep = {k: v for k, v in base.items() if k in _PASSED_ENV or k in _UV_ENV}
    return {**keep, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}


# --------------------------------------------------------------------------------------
# Worker processes
# --------------------------------------------------------------------------------------


@dataclass
class Worker:
    """One running ``_worker.py`` for one interpreter."""

    interpreter: Interpreter
    process: subprocess.Popen[str]
    lines: queue.Queue[str | None]
    stderr_tail: list[str]
    commit: str = "unknown"
    commit_source: str = ""
    import_seconds: float = 0.0
    versions: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_id: int = 0
    stderr_reader: threading.Thread | None = None
    #: The :func:`schema_identity` it was started under; the ``prime_rl`` files it imported, their
    #: digest then, and whether the identity covers them all (they lie under the source roots).
    identity: str = ""
    imported: tuple[Path, ...] = ()
    imported_digest: str = ""
    covered: bool = False

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        _kill(self.process)


_WORKERS: dict[tuple[Any, ...], Worker] = {}
_WORKERS_LOCK = threading.Lock()


def close_workers() -> None:
    """Stop every worker this process started."""
    with _WORKERS_LOCK:
        for worker in _WORKERS.values():
            worker.stop()
        _WORKERS.clear()


atexit.register(close_workers)


def _kill(process: subprocess.Popen[str]) -> None:
    if process.poll() is not None:
        return
    try:
        if os.name != "nt":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _unavailable(interpreter: Interpreter, what: str, fix: str, rule: str) -> RealBackendUnavailable:
    return RealBackendUnavailable(Finding((), f"real prime-rl schema unavailable ({interpreter.label}): {what}. {fix}",
                                          f"backend:{rule}", severity="warning", stage="backend", kind="backend"))


def _start(interpreter: Interpreter, timeout: float, env: Mapping[str, str] | None) -> Worker:
    try:
        process = subprocess.Popen([*interpreter.command, str(WORKER)], cwd=interpreter.cwd, env=_worker_env(env),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   bufsize=1, start_new_session=os.name != "nt")
    except OSError as exc:
        raise _unavailable(interpreter, f"cannot start it ({exc.strerror or exc})",
                           f"Point {ENV_PYTHON} at a Python 3.12 with prime-rl-configs installed", "start") from None
    lines: queue.Queue[str | None] = queue.Queue()
    tail: list[str] = []
    threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    reader = threading.Thread(target=_drain, args=(process.stderr, tail), daemon=True)
    reader.start()
    worker = Worker(interpreter, process, lines, tail, stderr_reader=reader)
    hello = _read(worker, min(timeout, 30.0), "to start")
    version = str((hello.get("hello") or {}).get("python", ""))
    if not version:
        worker.stop()
        raise _unavailable(interpreter, f"it printed {_shown(hello)} instead of the worker's greeting",
                           "Check that the command starts a Python interpreter", "protocol")
    if not version.startswith("3.12."):
        worker.stop()
        raise _unavailable(interpreter, f"it is Python {version}; prime-rl-configs needs Python 3.12",
                           f"Point {ENV_PYTHON} at a Python 3.12 with prime-rl-configs installed", "python_version")
    ready = _read(worker, timeout, "to import prime_rl.configs")
    if not ready.get("ready"):
        worker.stop()
        raise _unavailable(interpreter, f"prime_rl.configs does not import ({str(ready.get('error'))[:300]})",
                           "Install prime-rl-configs in that interpreter (uv pip install --python PYTHON "
                           "'prime-rl-configs @ git+https://github.com/PrimeIntellect-ai/prime-rl@COMMIT"
                           "#subdirectory=packages/prime-rl-configs')", "no_prime_rl")
    worker.import_seconds = float(ready.get("import_seconds") or 0.0)
    worker.imported = tuple(sorted(Path(f) for f in ready.get("sources") or () if isinstance(f, str)))
    worker.imported_digest = source_digest((), worker.imported)
    roots = [r.resolve() for r in interpreter.source_roots]
    worker.covered = bool(worker.imported) and all(
        any(f.resolve().is_relative_to(r) for r in roots) for f in worker.imported)
    worker.versions = dict(ready.get("versions") or {})
    if interpreter.commit:
        worker.commit, worker.commit_source = interpreter.commit, interpreter.commit_source
    elif ready.get("commit"):
        worker.commit, worker.commit_source = str(ready["commit"]), str(ready.get("commit_source") or "")
    else:
        worker.commit, worker.commit_source = "unknown", f"not recorded ({ready.get('commit_source')})"
    return worker


def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
    try:
        for line in stream:
            lines.put(line)
    except (OSError, ValueError):
        pass
    lines.put(None)


def _drain(stream: Any, tail: list[str]) -> None:
    try:
        for line in stream:
            tail.append(line)
            del tail[:-40]
    except (OSError, ValueError):
        pass


def _shown(obj: Any) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj)[:200]
    return repr(text[:200])


def _read(worker: Worker, timeout: float, doing: str) -> dict[str, Any]:
    """The next protocol line as a dict; a clear error for a hang, an exit or garbage."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        try:
            line = worker.lines.get(timeout=max(remaining, 0.0))
        except queue.Empty:
            worker.stop()
            raise _unavailable(worker.interpreter, f"no answer within {timeout:g} s {doing}",
                               "Raise the timeout, or check the interpreter by running it by hand", "timeout") from None
        if line is None:
            worker.process.wait(timeout=5)
            if worker.stderr_reader is not None:
                worker.stderr_reader.join(timeout=5)  # its last words, before saying what happened
            stderr = "".join(worker.stderr_tail).strip().splitlines()[-3:]
            raise _unavailable(worker.interpreter, f"it exited with status {worker.process.returncode} {doing}"
                               + (f" ({' / '.join(stderr)[:400]})" if stderr else ""),
                               f"Run it by hand to see the error, or point {ENV_PYTHON} elsewhere", "exited")
        try:
            obj = json.loads(line)
        except ValueError:
            worker.stop()
            raise _unavailable(worker.interpreter,
                               f"it printed {_shown(line.strip())}, which is not the worker protocol",
                               "Check that the command runs Python (and nothing that writes to stdout first)",
                               "protocol") from None
        if isinstance(obj, dict):
            return obj
        worker.stop()
        raise _unavailable(worker.interpreter, f"it printed {_shown(line.strip())}", "Check the interpreter",
                           "protocol")


def worker_for(interpreter: Interpreter, *, timeout: float, env: Mapping[str, str] | None = None,
               identity: str | None = None) -> Worker:
    """The running worker of ``interpreter``, started (and its import waited for) when needed:
    when none runs, it died, it was started under another :func:`schema_identity` than
    ``identity`` (default: the interpreter's now), or a ``prime_rl`` file it imported changed."""
    key = (interpreter.command, interpreter.cwd)
    identity = identity or schema_identity(interpreter)
    with _WORKERS_LOCK:
        worker = _WORKERS.get(key)
        if worker is not None and worker.alive:
            if worker.identity == identity and source_digest((), worker.imported) == worker.imported_digest:
                return worker
            worker.stop()  # the checkout moved on: import its schema again
        worker = _start(interpreter, timeout, env)
        worker.identity = identity
        _WORKERS[key] = worker
        return worker


def _forget(worker: Worker) -> None:
    with _WORKERS_LOCK:
        key = (worker.interpreter.command, worker.interpreter.cwd)
        if _WORKERS.get(key) is worker:
            del _WORKERS[key]
    worker.stop()


def validate_with(worker: Worker, data: dict[str, Any], mode: Mode, timeout: float) -> PassResult:
    """One ``model_validate`` in ``worker``: errors as findings (pydantic order, key paths in
    ``data``), the dump when valid, warnings, or the exception message."""
    with worker.lock:
        worker.next_id += 1
        request_id = worker.next_id
        try:
            assert worker.process.stdin is not None
            worker.process.stdin.write(json.dumps({"id": request_id, "mode": mode, "data": data, "dump": True},
                                                  default=str) + "\n")
            worker.process.stdin.flush()
        except (OSError, ValueError):
            _forget(worker)
            raise _unavailable(worker.interpreter, "it stopped reading its input", "Try again (a new worker starts)",
                               "exited") from None
        try:
            answer = _read(worker, timeout, "to validate")
        except RealBackendUnavailable:
            _forget(worker)
            raise
    if answer.get("id") != request_id:
        _forget(worker)
        raise _unavailable(worker.interpreter, f"it answered {_shown(answer)} out of turn", "Try again", "protocol")
    errors = [_finding(e, data) for e in answer.get("errors") or ()]
    exception = answer.get("exception")
    return PassResult(errors=errors, resolved=answer.get("dump") if not errors and not exception else None,
                      warnings=[str(w) for w in answer.get("warnings") or ()], exception=exception,
                      skipped=[str(s) for s in answer.get("skipped") or ()])


def _finding(error: dict[str, Any], data: dict[str, Any]) -> Finding:
    kind = str(error.get("type") or "value_error")
    loc = key_path(error.get("loc") or (), data, kind, union_tags())
    message = str(error.get("msg") or "")
    if kind in ("value_error", "assertion_error"):
        message = re.sub(r"^(Value error|Assertion failed), ", "", message)
    return Finding(loc, message, f"pydantic:{kind}", kind=kind)
