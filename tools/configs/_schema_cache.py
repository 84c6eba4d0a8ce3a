"""Remembered verdicts: a back-end's verdict on a config, kept in memory and in the state folder.

A verdict is keyed by (back-end, schema commit, mode, whether the run-start check ran, our rules'
version, the config's sha256): the same config checked against the same schema by the same code
gets the same verdict. :data:`RULES_VERSION` is a digest of this package's Python files and of
the shipped snapshot, so a changed rule or a re-exported snapshot never reads an old verdict.
A back-end whose schema commit is not known (a bare interpreter, a checkout with uncommitted
changes) is not cached on disk.

Memory: up to :data:`MEMORY_ENTRIES` verdicts per process (least recently used dropped). Disk:
``<state>/validation-cache/<key>.json`` (folder 0700), each written to a temporary file and
renamed (:func:`tools.platform.files.write_atomic`), so another process reads a whole entry or
none; at most :data:`DISK_ENTRIES` files, the oldest removed when a write goes over. A file
that cannot be read or parsed is a miss (and is removed); a folder that cannot be written just
means no disk cache. Nothing secret is stored: verdicts hold key paths, messages (scrubbed
later, when the report is built, as every output is) and rule ids.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tools.configs._schema_findings import Verdict
from tools.platform.files import write_atomic

MEMORY_ENTRIES = 256
DISK_ENTRIES = 512
FOLDER = "validation-cache"
_PACKAGE = Path(__file__).resolve().parent
_memory: OrderedDict[str, Verdict] = OrderedDict()
_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def rules_version() -> str:
    """12 hex digits of a sha256 over this package's ``*.py`` files and the shipped snapshot."""
    digest = hashlib.sha256()
    for path in sorted([*_PACKAGE.glob("*.py"), *(_PACKAGE / "schema_snapshot").glob("*.json")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def config_sha256(config: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of a parsed config (key order and whitespace do not count)."""
    canonical = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def cache_key(backend: str, commit: str, mode: str, run_start: bool, config: Mapping[str, Any]) -> str:
    """The key of a verdict (64 hex): back-end, schema commit, mode, run-start check, rules
    version, config sha256."""
    parts = [backend, commit, mode, str(int(run_start)), rules_version(), config_sha256(config)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class VerdictCache:
    """The memory cache of this process (unless ``memory`` is false) plus, when ``folder`` is
    given, the disk cache there, holding at most ``disk_entries`` files."""

    def __init__(self, folder: Path | None, *, disk_entries: int = DISK_ENTRIES, memory: bool = True) -> None:
        self.folder = folder
        self.disk_entries = disk_entries
        self.memory = memory

    @classmethod
    def in_state(cls, state: Path | None) -> VerdictCache:
        """The cache of a state folder (``ctx.state_path()``); ``None``: memory only."""
        return cls(state / FOLDER if state is not None else None)

    def get(self, key: str) -> Verdict | None:
        """The remembered verdict (``cached`` set), or None."""
        hit = None
        if self.memory:
            with _lock:
                hit = _memory.get(key)
                if hit is not None:
                    _memory.move_to_end(key)
        if hit is None and self.folder is not None:
            hit = self._read(self.folder / f"{key}.json")
            if hit is not None and self.memory:
                self._remember(key, hit)
        if hit is None:
            return None
        return Verdict(hit.backend, hit.mode, list(hit.findings), schema_commit=hit.schema_commit,
                       schema_source=hit.schema_source, interpreter=hit.interpreter,
                       elapsed_seconds=hit.elapsed_seconds, fallback_from=hit.fallback_from, cached=True)

    def put(self, key: str, verdict: Verdict, *, disk: bool = True) -> None:
        """Remember ``verdict`` (on disk too when ``disk`` and a folder is set)."""
        if self.memory:
            self._remember(key, verdict)
        if disk and self.folder is not None:
            self._write(self.folder / f"{key}.json", verdict)

    @staticmethod
    def _remember(key: str, verdict: Verdict) -> None:
        with _lock:
            _memory[key] = verdict
            _memory.move_to_end(key)
            while len(_memory) > MEMORY_ENTRIES:
                _memory.popitem(last=False)

    @staticmethod
    def _read(path: Path) -> Verdict | None:
        try:
            return Verdict.from_dict(json.loads(path.read_bytes()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                path.unlink()
            return None

    def _write(self, path: Path, verdict: Verdict) -> None:
        assert self.folder is not None
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomic(path, [json.dumps(verdict.to_dict(), default=str).encode()])
        except OSError:
            return
        self._prune()

    def _prune(self) -> None:
        assert self.folder is not None
        try:
            entries = list(self.folder.glob("*.json"))
            if len(entries) <= self.disk_entries:
                return
            aged = sorted(entries, key=lambda p: p.stat().st_mtime_ns)
        except OSError:
            return
        for path in aged[:len(aged) - self.disk_entries]:
            with contextlib.suppress(OSError):
                path.unlink()

