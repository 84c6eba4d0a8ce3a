"""Volume storage: what ``POST /training/volumes/{name}/transfer`` hands out and what the S3 side serves.

The real platform answers a ``get`` route with scoped, expiring S3 credentials for the volume's
prefix in an R2 bucket (prime 0.18.0 ``api/training.py`` ``VolumeTransferRoute``), and the CLI
reads the objects with boto3 (``commands/volumes.py`` ``_r2_client``, ``_get_plan``). Here the
objects are made up on demand, never held: a run's checkpoints appear under
``runs/<runId>/checkpoints/step_<n>/`` once the run has ended (or paused) and the volume has
synced (``Timing.volume_sync_seconds``), each checkpoint as the files of :data:`CHECKPOINT_FILES`
(small deterministic files standing in for DCP shards, and a large sparse one whose bytes are
zeros between a head and a tail). Tests add objects of their own (:meth:`VolumeStorage.put`),
spoil one (:meth:`VolumeStorage.tamper`: bytes that no longer match its checksum), expire every
credential after a number of requests (:meth:`VolumeStorage.expire_after`) or open a read-write
session (:meth:`VolumeStorage.open_session`: the route then answers ``via: "session"``).

Checksums as the store gives them: an object up to :data:`SINGLE_PART_BYTES` has its MD5 as ETag
(a single-part upload); a larger one an opaque multipart ETag (``"<hex>-<parts>"``) and its MD5 in
the ``md5chksum`` metadata (base64), as rclone writes it for multipart uploads (prime 0.18.0
``commands/volumes.py`` ``_rclone_metadata``), with its ``mtime`` metadata.

Decision (where the docs are silent): credentials last ``Timing.credential_seconds`` (900 s, the
15 minutes prime's comments give put credentials), are read-only and scoped to the volume's prefix.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import random
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

#: The bucket every volume's prefix lives in, and the path of the S3 endpoint on the emulator's port.
BUCKET = "mf-emulator-volumes"
S3_PATH = "/_s3"
#: Objects up to this size carry their MD5 as ETag; larger ones a multipart ETag and ``md5chksum`` metadata.
SINGLE_PART_BYTES = 16 * 2**20
#: Bytes of made-up content at each end of a sparse file (the rest are zeros).
SPARSE_EDGE = 4096
_ZEROS = bytes(2**20)


@dataclass(frozen=True)
class StoredFile:
    """One file of a checkpoint, relative to its ``step_<n>/`` folder; ``sparse`` = zeros but its two ends."""

    path: str
    size: int
    sparse: bool = False


#: What a simulated run writes per checkpoint (a DCP layout: ``.metadata`` and one shard per rank); about 13 MiB.
CHECKPOINT_FILES: tuple[StoredFile, ...] = (
    StoredFile("trainer/.metadata", 6_144),
    StoredFile("trainer/__0_0.distcp", 196_608),
    StoredFile("trainer/__1_0.distcp", 196_608),
    StoredFile("trainer/__2_0.distcp", 12 * 2**20, sparse=True),
    StoredFile("orchestrator/progress.pt", 412),
)


@dataclass
class StoredObject:
    """One object: its key, size and how its bytes are made (``seed``, ``sparse``), modified at ``modified``
    (simulated seconds); ``tampered``: the bytes served differ from the checksum it carries."""

    key: str
    size: int
    seed: str
    modified: float
    sparse: bool = False
    data: bytes | None = None
    tampered: bool = False
    modified_epoch: float = 0.0

    def chunks(self, start: int = 0, end: int | None = None, *, honest: bool = False) -> Iterator[bytes]:
        """Bytes ``start..end`` (inclusive; None = to the last), in pieces of at most 1 MiB. ``honest``: the
        bytes the checksum was made from, even when tampered."""
        end = self.size - 1 if end is None else end
        pos = start
        while pos <= end:
            if self.data is not None or not self.sparse:
                whole = self.data if self.data is not None else _dense(self.seed, self.size)
                piece = whole[pos:min(end + 1, pos + len(_ZEROS))]
            else:
                piece = _sparse_piece(self.seed, self.size, pos, min(end + 1, pos + len(_ZEROS)))
            if self.tampered and not honest and pos == start:
                piece = bytes([piece[0] ^ 0xFF]) + piece[1:]
            yield piece
            pos += len(piece)

    @property
    def md5(self) -> str:
        """Hex MD5 of the honest bytes (cached per content)."""
        if self.data is not None:
            return hashlib.md5(self.data).hexdigest()
        return _md5(self.seed, self.size, self.sparse)

    @property
    def etag(self) -> str:
        """The ETag as S3 sends it (quoted): the MD5, or an opaque multipart tag for a large object."""
        if self.size <= SINGLE_PART_BYTES:
            return f'"{self.md5}"'
        parts = -(-self.size // (64 * 2**20))
        return f'"{hashlib.md5(f"{self.seed}:{self.size}".encode()).hexdigest()}-{parts}"'

    def metadata(self) -> dict[str, str]:
        """User metadata (``x-amz-meta-*``) as rclone writes it: ``mtime`` always, ``md5chksum`` past single part."""
        meta = {"mtime": f"{self.modified_epoch:.3f}".rstrip("0").rstrip(".")}
        if self.size > SINGLE_PART_BYTES:
            meta["md5chksum"] = base64.b64encode(bytes.fromhex(self.md5)).decode()
        return meta


@lru_cache(maxsize=64)
def _dense(seed: str, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _edges(seed: str, size: int) -> tuple[bytes, bytes]:
    edge = min(SPARSE_EDGE, size // 2)
    return _dense(seed + ":head", edge), _dense(seed + ":tail", edge)


def _sparse_piece(seed: str, size: int, start: int, stop: int) -> bytes:
    head, tail = _edges(seed, size)
    tail_at = size - len(tail)
    if start >= len(head) and stop <= tail_at:
        return _ZEROS[:stop - start] if stop - start < len(_ZEROS) else _ZEROS
    out = bytearray(stop - start)
    for at, edge in ((0, head), (tail_at, tail)):
        lo, hi = max(start, at), min(stop, at + len(edge))
        if lo < hi:
            out[lo - start:hi - start] = edge[lo - at:hi - at]
    return bytes(out)


@lru_cache(maxsize=256)
def _md5(seed: str, size: int, sparse: bool) -> str:
    digest = hashlib.md5()
    for piece in StoredObject("", size, seed, 0.0, sparse).chunks(honest=True):
        digest.update(piece)
    return digest.hexdigest()


@dataclass
class Credential:
    """Scoped read credentials of one route answer; ``expires_at`` in simulated seconds."""

    access_key_id: str
    secret_access_key: str
    session_token: str
    prefix: str
    expires_at: float
    expired: bool = False


@dataclass
class VolumeStorage:
    """Every volume's objects beyond the runs' checkpoints, issued credentials and the storage faults."""

    files: tuple[StoredFile, ...] = CHECKPOINT_FILES
    credentials: dict[str, Credential] = field(default_factory=dict)
    extra: dict[str, StoredObject] = field(default_factory=dict)
    tampered: set[str] = field(default_factory=set)
    sessions: set[str] = field(default_factory=set)
    expire_countdown: int | None = None
    requests: int = 0
    #: S3 error answers by code (``ExpiredToken``, ``AccessDenied``, ...): what tests check was refused.
    refusals: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def prefix(owner: str, volume: str) -> str:
        """The volume's key prefix in :data:`BUCKET` (``volumes/<team or user id>/<name>/``)."""
        return f"volumes/{owner}/{volume}/"

    def issue(self, prefix: str, now: float, seconds: float) -> Credential:
        """New read credentials for ``prefix``, valid ``seconds`` from ``now``."""
        cred = Credential("MFEMU" + secrets.token_hex(8).upper(), "fake-emulator-secret-" + secrets.token_hex(16),
                          "fake-emulator-session-" + secrets.token_hex(24), prefix, now + seconds)
        with self.lock:
            self.credentials[cred.access_key_id] = cred
        return cred

    def put(self, key: str, data: bytes, now: float, epoch: float) -> None:
        """Store ``data`` under the full ``key`` (prefix included): an object tests add (an unsafe name, ...)."""
        with self.lock:
            self.extra[key] = StoredObject(key, len(data), "put:" + key, now, data=data, modified_epoch=epoch + now)

    def tamper(self, key: str) -> None:
        """Serve the object ``key`` (full key) with a flipped first byte: it no longer matches its checksum."""
        with self.lock:
            self.tampered.add(key)

    def expire_after(self, requests: int) -> None:
        """After ``requests`` more authorised S3 requests, every credential issued so far expires (a credential
        running out mid-download); 0 = now."""
        with self.lock:
            self.expire_countdown = requests
            if requests == 0:
                self._expire_all()

    def _expire_all(self) -> None:
        for cred in self.credentials.values():
            cred.expired = True
        self.expire_countdown = None

    def count_request(self) -> None:
        """One authorised S3 request was served (drives :meth:`expire_after`)."""
        with self.lock:
            self.requests += 1
            if self.expire_countdown is not None:
                self.expire_countdown -= 1
                if self.expire_countdown <= 0:
                    self._expire_all()

    def refused(self, code: str) -> None:
        """One S3 request was answered with the error ``code``."""
        with self.lock:
            self.refusals[code] = self.refusals.get(code, 0) + 1

    def open_session(self, prefix: str, is_open: bool = True) -> None:
        """A live read-write session on the volume of ``prefix`` (the route then answers ``via: "session"``)."""
        with self.lock:
            (self.sessions.add if is_open else self.sessions.discard)(prefix)

    def added(self, prefix: str) -> list[StoredObject]:
        """Objects tests put under ``prefix``."""
        with self.lock:
            return [dataclasses.replace(o, tampered=k in self.tampered) for k, o in self.extra.items()
                    if k.startswith(prefix)]

    def checkpoint_objects(self, prefix: str, run_id: str, step: int, created: float,
                           created_epoch: float) -> list[StoredObject]:
        """The objects of one checkpoint of a run on the volume of ``prefix``."""
        base = f"{prefix}runs/{run_id}/checkpoints/step_{step}/"
        return [StoredObject(base + f.path, f.size, f"{run_id}:{step}:{f.path}", created, f.sparse,
                             modified_epoch=created_epoch, tampered=(base + f.path) in self.tampered)
                for f in self.files]
