"""The S3-compatible side of volume storage, under ``/_s3`` on the emulator's port (path-style, as boto3
addresses a custom endpoint): ListObjectsV2, HeadObject and GetObject (ranges, ``If-Match``), the read
subset ``prime volumes get/ls/du/cat`` 0.18.0 and our checkpoint download use. Requests are signed with
AWS Signature V4 by the credentials a transfer route handed out; each is checked here (key, session
token, expiry on the simulated clock, signature, the volume's prefix) and refused with S3's own XML
errors (``InvalidAccessKeyId``, ``InvalidToken``, ``ExpiredToken``, ``SignatureDoesNotMatch``,
``AccessDenied``, ``NoSuchKey``, ``NoSuchBucket``, ``InvalidRange``, ``PreconditionFailed``).

Why not a library: moto 5.2.5 (the well-kept in-process S3 emulator) was measured first: 0.69 s to
import, ~50 MB resident, and no notion of credential expiry; its GetObject reads the whole object into
memory for every ranged request (``S3Response._handle_range_header`` slices ``FakeKey.value``), so
uploading a 512 MiB object took 1.6 GB of memory. A 2 GB checkpoint in 64 MiB parts does not fit that.
Here bytes are made on demand (:mod:`.storage`): nothing is held, and nothing starts until asked for.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from email.utils import formatdate
from typing import Any
from urllib.parse import quote, unquote
from xml.sax.saxutils import escape

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .state import EmulatorState
from .storage import BUCKET, S3_PATH, StoredObject

_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,\s*"
                   r"SignedHeaders=([^,]+),\s*Signature=([0-9a-f]{64})")
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
MAX_KEYS = 1000


class S3Error(Exception):
    """An S3 error answer (XML ``<Error>``)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message

    def response(self, resource: str, head: bool = False) -> Response:
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{self.code}</Code>'
                f"<Message>{escape(self.message)}</Message><Resource>{escape(resource)}</Resource>"
                "<RequestId>emulator</RequestId></Error>").encode()
        return Response(b"" if head else body, status_code=self.status, media_type="application/xml",
                        headers={"x-amz-error-code": self.code} if head else None)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _canonical_query(raw: str) -> str:
    pairs = [(quote(unquote(k), safe="-_.~"), quote(unquote(v), safe="-_.~"))
             for k, _, v in (p.partition("=") for p in raw.split("&") if p)]
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def check_signature(request: Request, secret: str, date: str, region: str, service: str,
                    signed: str, signature: str) -> bool:
    """Whether ``signature`` is the SigV4 signature of this request with ``secret`` (S3 rules: the path as
    sent, not normalised; the payload hash from ``x-amz-content-sha256``)."""
    scope = request.scope
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    names = signed.split(";")
    canonical = "\n".join([
        scope["method"], scope.get("raw_path", scope["path"].encode()).decode("latin-1").split("?")[0],
        _canonical_query(scope.get("query_string", b"").decode("latin-1")),
        "".join(f"{n}:{' '.join(headers.get(n, '').split())}\n" for n in names), signed,
        headers.get("x-amz-content-sha256", "UNSIGNED-PAYLOAD")])
    stamp = headers.get("x-amz-date", "")
    credential_scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, credential_scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret}".encode(), date), region), service), "aws4_request")
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


def _http_date(epoch: float) -> str:
    return formatdate(epoch, usegmt=True)


def _iso(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _object_headers(obj: StoredObject) -> dict[str, str]:
    headers = {"etag": obj.etag, "last-modified": _http_date(obj.modified_epoch), "accept-ranges": "bytes",
               "content-type": "application/octet-stream"}
    headers.update({f"x-amz-meta-{k}": v for k, v in obj.metadata().items()})
    return headers


def storage_routes(state: EmulatorState) -> list[Route]:
    """The S3 routes, bound to ``state``."""

    def authorize(request: Request) -> str:
        """The credential's prefix, after every check; raises S3Error."""
        match = _AUTH.fullmatch(request.headers.get("authorization", "").strip())
        if match is None:
            raise S3Error(403, "AccessDenied", "Anonymous access is not allowed; sign the request (SigV4)")
        key_id, date, region, service, signed, signature = match.groups()
        cred = state.storage.credentials.get(key_id)
        if cred is None:
            raise S3Error(403, "InvalidAccessKeyId", "The access key ID you provided does not exist in our records.")
        if request.headers.get("x-amz-security-token") != cred.session_token:
            raise S3Error(400, "InvalidToken", "The provided token is malformed or otherwise invalid.")
        if cred.expired or state.now() >= cred.expires_at:
            raise S3Error(400, "ExpiredToken", "The provided token has expired.")
        if not check_signature(request, cred.secret_access_key, date, region, service, signed, signature):
            raise S3Error(403, "SignatureDoesNotMatch", "The request signature we calculated does not match "
                                                        "the signature you provided.")
        state.storage.count_request()
        return cred.prefix

    def bucket_of(request: Request) -> None:
        if request.path_params["bucket"] != BUCKET:
            raise S3Error(404, "NoSuchBucket", "The specified bucket does not exist")

    async def list_objects(request: Request) -> Response:
        try:
            bucket_of(request)
            allowed = authorize(request)
            q = request.query_params
            if q.get("list-type") != "2":
                raise S3Error(400, "NotImplemented", "Only ListObjectsV2 (list-type=2) is emulated")
            prefix, delimiter = q.get("prefix", ""), q.get("delimiter") or ""
            if not prefix.startswith(allowed):
                raise S3Error(403, "AccessDenied", f"These credentials may list {allowed} only")
            try:
                max_keys = max(0, min(MAX_KEYS, int(q.get("max-keys", MAX_KEYS))))
            except ValueError:
                raise S3Error(400, "InvalidArgument", "max-keys must be an integer") from None
            token = q.get("continuation-token")
            after = base64.urlsafe_b64decode(token.encode()).decode() if token else q.get("start-after", "")
            return _listing(state.stored_objects(allowed), prefix, delimiter, max_keys, after, token,
                            q.get("encoding-type") == "url")
        except S3Error as exc:
            state.storage.refused(exc.code)
            return exc.response(request.url.path)

    async def get_object(request: Request) -> Response:
        head = request.method == "HEAD"
        try:
            bucket_of(request)
            allowed = authorize(request)
            key = request.path_params["key"]
            if not key.startswith(allowed):
                raise S3Error(403, "AccessDenied", f"These credentials may read {allowed} only")
            obj = next((o for o in state.stored_objects(allowed) if o.key == key), None)
            if obj is None:
                raise S3Error(404, "NoSuchKey", "The specified key does not exist.")
            headers = _object_headers(obj)
            wanted = request.headers.get("if-match")
            if wanted and wanted.strip() not in ("*", obj.etag):
                raise S3Error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did "
                                                         "not hold")
            start, end, status = 0, obj.size - 1, 200
            asked = request.headers.get("range")
            if asked:
                start, end = _byte_range(asked, obj.size)
                status = 206
                headers["content-range"] = f"bytes {start}-{end}/{obj.size}"
            headers["content-length"] = str(max(0, end - start + 1))
            if head:
                return Response(b"", status_code=status, headers=headers)

            async def body() -> Any:
                for piece in obj.chunks(start, end):
                    yield piece

            return StreamingResponse(body(), status_code=status, headers=headers)
        except S3Error as exc:
            state.storage.refused(exc.code)
            return exc.response(request.url.path, head)

    return [
        Route(S3_PATH + "/{bucket}", list_objects, methods=["GET"]),
        Route(S3_PATH + "/{bucket}/{key:path}", get_object, methods=["GET", "HEAD"]),
    ]


def _byte_range(text: str, size: int) -> tuple[int, int]:
    match = _RANGE.fullmatch(text.strip())
    if match is None or match.groups() == ("", ""):
        return 0, size - 1
    first, last = match.groups()
    if first == "":
        start, end = max(0, size - int(last)), size - 1
    else:
        start, end = int(first), min(size - 1, int(last)) if last else size - 1
    if start >= size or start > end:
        raise S3Error(416, "InvalidRange", "The requested range is not satisfiable")
    return start, end


def _listing(objects: list[StoredObject], prefix: str, delimiter: str, max_keys: int, after: str,
             token: str | None, url_encoded: bool) -> Response:
    def enc(text: str) -> str:
        return escape(quote(text, safe="/~") if url_encoded else text)

    contents: list[StoredObject] = []
    prefixes: list[str] = []
    last = ""
    truncated = False
    for obj in objects:  # sorted by key
        if not obj.key.startswith(prefix) or obj.key <= after:
            continue
        rest = obj.key[len(prefix):]
        if delimiter and delimiter in rest:
            common = prefix + rest.split(delimiter, 1)[0] + delimiter
            if common <= after or (prefixes and prefixes[-1] == common):
                continue
            if len(contents) + len(prefixes) >= max_keys:
                truncated = True
                break
            prefixes.append(common)
            last = common + "\uffff"  # past every key under it
            continue
        if len(contents) + len(prefixes) >= max_keys:
            truncated = True
            break
        contents.append(obj)
        last = obj.key
    parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{_NS}">', f"<Name>{BUCKET}</Name>",
             f"<Prefix>{enc(prefix)}</Prefix>", f"<KeyCount>{len(contents) + len(prefixes)}</KeyCount>",
             f"<MaxKeys>{max_keys}</MaxKeys>", f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"]
    if delimiter:
        parts.append(f"<Delimiter>{enc(delimiter)}</Delimiter>")
    if url_encoded:
        parts.append("<EncodingType>url</EncodingType>")
    if token:
        parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
    if truncated:
        parts.append(f"<NextContinuationToken>{base64.urlsafe_b64encode(last.encode()).decode()}"
                     "</NextContinuationToken>")
    for obj in contents:
        parts.append(f"<Contents><Key>{enc(obj.key)}</Key><LastModified>{_iso(obj.modified_epoch)}</LastModified>"
                     f"<ETag>{escape(obj.etag)}</ETag><Size>{obj.size}</Size>"
                     "<StorageClass>STANDARD</StorageClass></Contents>")
    for common in prefixes:
        parts.append(f"<CommonPrefixes><Prefix>{enc(common)}</Prefix></CommonPrefixes>")
    parts.append("</ListBucketResult>")
    return Response("".join(parts).encode(), media_type="application/xml")
