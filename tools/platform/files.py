"""Atomic file writes, shared by :meth:`~tools.platform.client.TracesClient.download_raw_trace`
and the tools that write files (traces downloads, metric plots)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

#: Suffix of write_atomic's temporary siblings (``.<name>.<random>.partial``).
PARTIAL_SUFFIX = ".partial"


def is_partial(path: Path) -> bool:
    """True for a temporary sibling of :func:`write_atomic`: what a process killed mid-write
    (SIGKILL, power loss) leaves behind. Never a finished file: those appear only by rename."""
    return path.name.startswith(".") and path.name.endswith(PARTIAL_SUFFIX)


def write_atomic(target: Path, chunks: Iterable[bytes]) -> tuple[int, str]:
    """Write ``chunks`` to a hidden temporary sibling (``.<name>.*.partial``), then rename it onto
    ``target``.

    Returns (bytes written, sha256 hex of them). On any failure (including an exception
    raised by ``chunks``) the temporary file is removed and ``target`` is left as it was.
    The folder of ``target`` must exist.
    """
    digest = hashlib.sha256()
    written = 0
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=PARTIAL_SUFFIX)
    partial = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
                digest.update(chunk)
                written += len(chunk)
        os.replace(partial, target)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    return written, digest.hexdigest()
