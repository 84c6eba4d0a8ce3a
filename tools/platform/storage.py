"""Reading a volume's storage over S3, with the scoped credentials of its transfer route, as ``prime volumes
get/ls/du`` 0.18.0 does (``commands/volumes.py``: ``_r2_client``, ``_r2_keys``, ``_r2_head``;
``volume_objects.py``).

- The client is boto3's (what the CLI uses), path-style on the route's ``endpoint``, SigV4, region
  ``auto``. boto3 is imported when a :class:`VolumeReader` is built, never on import of this module:
  only a storage read pays its start-up (about 0.4 s).
- Credentials are botocore ``RefreshableCredentials`` over a new route call, refreshed 5 minutes
  before ``expiresAt`` (mandatory 2 minutes before), the CLI's windows. Time is the platform's: the
  ``Date`` of the route's answer plus the injected ``clock`` since (so a fast emulator clock and
  tests' fake time hold). An ``ExpiredToken`` answer (or a bare HTTP 400 to a HEAD, which has no body
  to say so) makes the next request refresh at once and the call is repeated once.
- botocore's own retries are off (their waits would be wall time): callers retry with their sleep.
  Every failure is a :mod:`tools.platform.errors` type; no botocore exception is chained (its request
  holds the signature).
- Keys are handed out relative to the volume root; a listed key outside the volume's prefix is refused
  (``InvalidRequest``), as ``volume_objects._relative`` does.

Checksums the store gives (:meth:`StoredObject.md5`): the ETag when it is a plain MD5 (a single-part
upload), else rclone's ``md5chksum`` metadata (base64 MD5, written for multipart uploads: prime's
``_rclone_metadata``), else none.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tools.platform import errors as perr
from tools.platform import wire

#: The CLI's refresh windows (``_r2_client``): refresh this long before expiry, and must refresh by the second.
ADVISORY_REFRESH_SECONDS = 5 * 60
MANDATORY_REFRESH_SECONDS = 2 * 60
#: Listing pages followed at most (1,000 keys each).
MAX_LIST_PAGES = 10_000
_MD5 = re.compile(r'^"?([0-9a-f]{32})"?$')
_EXPIRED = {"ExpiredToken", "TokenRefreshRequired"}
#: botocore's data loader, shared by every reader of this process.
_LOADER: Any = None


@dataclass(frozen=True)
class StoredObject:
    """One object of a volume: ``key`` relative to the volume root, ``size`` in bytes, ``etag`` as sent,
    ``modified`` (UTC), and user ``metadata`` (from a HEAD; empty from a listing)."""

    key: str
    size: int
    etag: str | None = None
    modified: datetime | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    def md5(self) -> str | None:
        """Hex MD5 the store gives for the object: a plain-MD5 ETag, else ``md5chksum`` metadata; None if neither."""
        match = _MD5.match(self.etag or "")
        if match:
            return match.group(1)
        try:
            raw = base64.b64decode(self.metadata.get("md5chksum", ""), validate=True)
        except (binascii.Error, ValueError):
            return None
        return raw.hex() if len(raw) == 16 else None

    def mtime_ns(self) -> int | None:
        """The file's modification time (Unix nanoseconds): rclone's ``mtime`` metadata (decimal seconds, read
        exactly as prime's ``_restore_mtime`` reads it), else LastModified."""
        from decimal import Decimal, InvalidOperation

        try:
            return int(Decimal(self.metadata["mtime"]) * 10**9)
        except (KeyError, InvalidOperation, ValueError, TypeError):
            return int(self.modified.timestamp() * 10**9) if self.modified else None


@dataclass(frozen=True)
class Listing:
    """One page of a listing: objects and (with a delimiter) folder prefixes, both relative to the volume root."""

    objects: list[StoredObject]
    prefixes: list[str]
    next_token: str | None


class VolumeReader:
    """Reads one volume's objects; a context manager.

    Args:
        route: a new route call (``PlatformClient.route_volume_transfer``) returning ``(route, server_now)``:
            the first gives the credentials, later ones refresh them.
        clock: monotonic seconds (the Context's clock).
        connections: HTTP connections kept (one per concurrent request).
        read_seconds, connect_seconds: socket timeouts.

    Raises (from the constructor): NotFound / Conflict / Forbidden / InvalidRequest as the route does;
    Conflict when the route is ``via: "session"`` (``self.session`` is then set before raising).
    """

    def __init__(self, route: Callable[[], tuple[wire.VolumeTransferRoute, datetime | None]], *,
                 clock: Callable[[], float], connections: int = 16, read_seconds: float = 60.0,
                 connect_seconds: float = 10.0) -> None:
        self._route_fn, self._clock = route, clock
        self._lock = threading.Lock()
        self._anchor: tuple[datetime, float] = (datetime.now(UTC), clock())
        self._expired_until: datetime | None = None
        self._expiry: datetime | None = None
        self.refreshes = 0
        first = self._fetch()
        self.bucket, self.prefix, self.endpoint = first.bucket or "", first.prefix or "", first.endpoint or ""
        self._client = _make_client(first, self._refresh_metadata, self._now, connections, read_seconds,
                                    connect_seconds)

    # -- credentials -------------------------------------------------------------------------
    def _fetch(self) -> wire.VolumeTransferRoute:
        route, server_now = self._route_fn()
        if route.via != "r2":
            raise perr.Conflict("The volume has a live read-write session: its route goes through the session "
                                "(SSH), not straight to storage", service_code="via_session")
        if not route.complete():
            raise perr.InvalidRequest("The transfer route did not return complete read credentials "
                                      "(endpoint, bucket, prefix ending in /, key)")
        with self._lock:
            self._anchor = (server_now or datetime.now(UTC), self._clock())
            self._expiry = _parse_expiry(route.expires_at) if route.expires_at else None
            self._expired_until = None
        return route

    def _now(self) -> datetime:
        """The platform's time now: the last route answer's Date plus the clock since; past the current
        credentials' expiry after the store said they expired."""
        with self._lock:
            stamp, at = self._anchor
            now = stamp + timedelta(seconds=self._clock() - at)
            return max(now, self._expired_until) if self._expired_until else now

    def _refresh_metadata(self) -> dict[str, Any]:
        route = self._fetch()
        self.refreshes += 1
        return _metadata(route)

    def _store_said_expired(self, signed_with: datetime | None) -> None:
        """The store refused credentials as expired: unless they were renewed since the refused request (by
        another thread), let the clock read past their expiry, so the next signing renews them first."""
        with self._lock:
            if self._expiry == signed_with:
                self._expired_until = (self._expiry or self._anchor[0]) + timedelta(seconds=1)

    def _call(self, what: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        for attempt in (1, 2):
            signed_with = self._expiry
            try:
                return fn(**kwargs)
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if attempt == 1 and (code in _EXPIRED or (code == "400" and what == "HeadObject")):
                    self._store_said_expired(signed_with)
                    continue
                raise _client_error(exc, what) from None
            except BotoCoreError as exc:
                raise perr.Unavailable(f"{what}: {type(exc).__name__}: {exc}", endpoint=what) from None
        raise AssertionError("unreachable")  # pragma: no cover

    # -- reads -------------------------------------------------------------------------------
    def _relative(self, key: str) -> str:
        if not key.startswith(self.prefix):
            raise perr.InvalidRequest(f"Storage listed an object outside the volume ({key[:200]!r})",
                                      service_code="outside_prefix")
        return key[len(self.prefix):]

    def list_page(self, path: str, *, delimiter: str | None = None, max_keys: int = 1000,
                  token: str | None = None, start_after: str | None = None) -> Listing:
        """ListObjectsV2 of ``path`` (relative to the volume root; a folder ends in ``/``): one page."""
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix + path, "MaxKeys": max_keys}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        if token:
            kwargs["ContinuationToken"] = token
        elif start_after:
            kwargs["StartAfter"] = self.prefix + start_after
        page = self._call("ListObjectsV2", self._client.list_objects_v2, **kwargs)
        objects = [StoredObject(self._relative(o["Key"]), int(o.get("Size", 0)), o.get("ETag"),
                                o.get("LastModified")) for o in page.get("Contents", [])]
        prefixes = [self._relative(p["Prefix"]) for p in page.get("CommonPrefixes", [])]
        token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
        return Listing(objects, prefixes, token)

    def iter_objects(self, path: str) -> Iterator[StoredObject]:
        """Every object under ``path`` (all pages; stops on a repeated token or after :data:`MAX_LIST_PAGES`)."""
        token: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_LIST_PAGES):
            page = self.list_page(path, token=token)
            yield from page.objects
            if page.next_token is None or page.next_token in seen:
                return
            seen.add(page.next_token)
            token = page.next_token
        raise perr.InvalidRequest(f"Storage listing of {path!r} went past {MAX_LIST_PAGES} pages")

    def head(self, key: str) -> StoredObject:
        """HeadObject of ``key`` (relative): size, ETag, LastModified, metadata. NotFound when absent."""
        h = self._call("HeadObject", self._client.head_object, Bucket=self.bucket, Key=self.prefix + key)
        return StoredObject(key, int(h.get("ContentLength", 0)), h.get("ETag"), h.get("LastModified"),
                            dict(h.get("Metadata") or {}))

    def read(self, key: str, start: int, end: int, *, etag: str | None = None,
             chunk_bytes: int = 2**20) -> Iterator[bytes]:
        """Bytes ``start..end`` (inclusive) of ``key``, in chunks; ``etag``: only while the object still has it
        (a changed object is Conflict). A cut stream raises Unavailable; a short one too."""
        from botocore.exceptions import BotoCoreError

        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self.prefix + key, "Range": f"bytes={start}-{end}"}
        if etag:
            kwargs["IfMatch"] = etag
        body = self._call("GetObject", self._client.get_object, **kwargs)["Body"]
        got = 0
        try:
            for chunk in body.iter_chunks(chunk_bytes):
                got += len(chunk)
                yield chunk
        except (BotoCoreError, OSError) as exc:
            raise perr.Unavailable(f"GetObject {key}: the connection was cut after {got} bytes "
                                   f"({type(exc).__name__})", endpoint="GetObject") from None
        finally:
            body.close()
        if got != end - start + 1:
            raise perr.Unavailable(f"GetObject {key}: {got} of {end - start + 1} bytes arrived", endpoint="GetObject")

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> VolumeReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _metadata(route: wire.VolumeTransferRoute) -> dict[str, Any]:
    assert route.secret_access_key is not None
    return {"access_key": route.access_key_id, "secret_key": route.secret_access_key.get_secret_value(),
            "token": route.session_token.get_secret_value() if route.session_token else None,
            "expiry_time": route.expires_at}


def _make_client(route: wire.VolumeTransferRoute, refresh: Callable[[], dict[str, Any]],
                 now: Callable[[], datetime], connections: int, read_seconds: float,
                 connect_seconds: float) -> Any:
    import boto3
    from botocore.config import Config
    from botocore.credentials import RefreshableCredentials
    from botocore.session import get_session

    global _LOADER
    core = get_session()
    if _LOADER is None:
        _LOADER = core.get_component("data_loader")
    core.register_component("data_loader", _LOADER)  # the service models, parsed once per process (~55 ms each)
    meta = _metadata(route)
    if route.expires_at:
        creds = RefreshableCredentials(  # as prime's _r2_client; time_fetcher: the platform's clock
            meta["access_key"], meta["secret_key"], meta["token"], _parse_expiry(route.expires_at), refresh,
            "model-factory-volume-transfer", time_fetcher=now, advisory_timeout=ADVISORY_REFRESH_SECONDS,
            mandatory_timeout=MANDATORY_REFRESH_SECONDS)
        core._credentials = creds  # what prime's _r2_client sets too (botocore has no public setter)
    else:
        core.set_credentials(meta["access_key"], meta["secret_key"], meta["token"])
    config = Config(signature_version="s3v4", max_pool_connections=connections, retries={"total_max_attempts": 1},
                    read_timeout=read_seconds, connect_timeout=connect_seconds,
                    s3={"addressing_style": "path"}, request_checksum_calculation="when_required",
                    response_checksum_validation="when_required")
    client = boto3.Session(botocore_session=core).client("s3", endpoint_url=route.endpoint, region_name="auto",
                                                         config=config)
    return client



def _parse_expiry(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _client_error(exc: Any, what: str) -> perr.PlatformError:
    """The typed error of an S3 error answer (its code, else its HTTP status, as botocore reads a bodiless HEAD)."""
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0) or None
    text = f"{what}: {code or status}: {error.get('Message') or 'no message'}"
    if code in ("NoSuchKey", "404", "NotFound", "NoSuchBucket"):
        return perr.NotFound(text, status=status, service_code=code, endpoint=what)
    if code in _EXPIRED or code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
                                    "403", "400"):
        return perr.Forbidden(text, status=status, service_code=code, endpoint=what)
    if code in ("PreconditionFailed", "412"):
        return perr.Conflict(text, status=status, service_code="changed", endpoint=what)
    if code in ("SlowDown", "InternalError", "ServiceUnavailable") or (status or 0) >= 500:
        return perr.Unavailable(text, status=status, service_code=code, endpoint=what)
    return perr.InvalidRequest(text, status=status, service_code=code, endpoint=what)
