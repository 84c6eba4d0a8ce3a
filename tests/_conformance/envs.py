"""The virtual environments the conformance benchmark and the schema tests need, built once and cached.

- The real prime-rl schema: ``../shared/fixtures/prime-rl-schema/build-venv.sh DEST
  [--with-tasksets]`` (verbatim prime-rl-configs at 559b447 and its verifiers pin, plus about
  100 packages from PyPI). DEST is ``~/.cache/model-factory-skill/prime-rl-schema-<hash>[-tasksets]``
  where ``<hash>`` is a digest of the fixture's files, so a changed fixture gets a new
  environment and an unchanged one is never rebuilt; a ``.ready`` marker is written last, so
  an interrupted build is redone. ``MF_SCHEMA_FIXTURE`` overrides the fixture folder,
  ``MF_SCHEMA_CACHE`` the cache folder.
- ``prime`` 0.18.0 from PyPI (its ``training_schema_worker.py`` and ``_hosted_config`` are the
  benchmark's reference): the same environment ``tests/test_prime_cli_interop.py`` builds,
  ``~/.cache/model-factory-skill/prime-0.18.0`` (``MF_PRIME_VENV`` overrides).

Builds take a file lock, so parallel test processes build once. :class:`EnvironmentUnavailable`
says why an environment cannot be had (no fixture, no uv, no registry); callers skip or fail.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]
PRIME_VERSION = "0.18.0"
#: The prime-rl commit the fixture holds (its PROVENANCE.md).
FIXTURE_COMMIT = "559b44772e471d1538537b8805cc77f3824a5e64"


class EnvironmentUnavailable(RuntimeError):
    """An environment cannot be built or found; the message says why."""


def cache_dir() -> Path:
    """Where the environments live (``MF_SCHEMA_CACHE`` or ``~/.cache/model-factory-skill``)."""
    return Path(os.environ.get("MF_SCHEMA_CACHE") or Path.home() / ".cache" / "model-factory-skill")


def fixture_dir() -> Path:
    """``../shared/fixtures/prime-rl-schema`` next to the checkout (``MF_SCHEMA_FIXTURE`` overrides)."""
    return Path(os.environ.get("MF_SCHEMA_FIXTURE") or ROOT.parent / "shared" / "fixtures" / "prime-rl-schema")


def fixture_digest(folder: Path | None = None) -> str:
    """First 12 hex of a sha256 over the fixture's relative paths and contents."""
    folder = folder or fixture_dir()
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def schema_python(*, tasksets: bool) -> Path:
    """The ``bin/python`` of the fixture's schema environment, built when missing.

    Raises :class:`EnvironmentUnavailable` when the fixture or uv is missing or the build fails."""
    folder = fixture_dir()
    script = folder / "build-venv.sh"
    if not script.is_file():
        raise EnvironmentUnavailable(f"no prime-rl schema fixture at {folder} (build-venv.sh missing)")
    dest = cache_dir() / f"prime-rl-schema-{fixture_digest(folder)}{'-tasksets' if tasksets else ''}"
    python = dest / "bin" / "python"
    if (dest / ".ready").exists() and python.exists():
        return python
    if shutil.which("uv") is None:
        raise EnvironmentUnavailable("uv is not on PATH: cannot build the prime-rl schema environment")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock", timeout=1800):
        if (dest / ".ready").exists() and python.exists():
            return python
        shutil.rmtree(dest, ignore_errors=True)
        command = ["bash", str(script), str(dest), *(["--with-tasksets"] if tasksets else [])]
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
        except subprocess.TimeoutExpired:
            raise EnvironmentUnavailable(f"building the schema environment timed out: {' '.join(command)}") from None
        if done.returncode != 0:
            raise EnvironmentUnavailable(f"building the schema environment failed ({' '.join(command)}): "
                                         f"{done.stderr[-800:]}")
        (dest / ".build-seconds").write_text(f"{time.monotonic() - started:.1f}\n")
        (dest / ".ready").touch()
    return python


def prime_python() -> Path:
    """The ``bin/python`` of the prime 0.18.0 environment (built with uv from PyPI when missing)."""
    venv = Path(os.environ.get("MF_PRIME_VENV") or cache_dir() / f"prime-{PRIME_VERSION}")
    python = venv / "bin" / "python"
    if python.exists() and _prime_version(python) == PRIME_VERSION:
        return python
    uv = shutil.which("uv")
    if uv is None:
        raise EnvironmentUnavailable(f"uv is not on PATH: cannot build the prime {PRIME_VERSION} environment")
    venv.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(venv) + ".lock", timeout=600):
        if python.exists() and _prime_version(python) == PRIME_VERSION:
            return python
        shutil.rmtree(venv, ignore_errors=True)
        for step in ([uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
                     [uv, "pip", "install", "--quiet", "--python", str(python), f"prime=={PRIME_VERSION}"]):
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=600, check=False)
            except subprocess.TimeoutExpired:
                raise EnvironmentUnavailable(f"installing prime {PRIME_VERSION} timed out") from None
            if done.returncode != 0:
                raise EnvironmentUnavailable(f"cannot install prime {PRIME_VERSION}: {done.stderr[-500:]}")
    return python


def _prime_version(python: Path) -> str | None:
    try:
        done = subprocess.run([str(python), "-c", "from importlib.metadata import version; print(version('prime'))"],
                              capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def prime_worker_file(python: Path) -> Path:
    """``prime_cli/utils/training_schema_worker.py`` of the prime environment whose python is ``python``."""
    venv = python.parent.parent
    found = sorted(venv.glob("lib/python*/site-packages/prime_cli/utils/training_schema_worker.py"))
    if not found:
        raise EnvironmentUnavailable(f"no prime_cli/utils/training_schema_worker.py under {venv}")
    return found[0]


def build_seconds(python: Path) -> float | None:
    """How long the build of the environment of ``python`` took (recorded at build time)."""
    marker = python.parent.parent / ".build-seconds"
    try:
        return float(marker.read_text())
    except (OSError, ValueError):
        return None
