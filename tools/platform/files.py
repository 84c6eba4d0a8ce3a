"""Atomic file writes, shared by :meth:`~tools.platform.client.TracesClient.download_raw_trace`
and the tools that write files (traces downloads, log exports, metric plots, the schema cache).

A file is written unnamed and gets its name only when complete, so a reader never sees part of
one. On Linux the bytes go to an unnamed file in the target's folder (``open(folder, O_TMPFILE)``)
that is linked under its name at the end (``linkat`` through ``/proc/self/fd``): a process killed
mid-write leaves nothing behind, and each file costs one change to the folder instead of a create
and a rename (measured in ``benchmarks/bench_traces.py``). Where the folder's file system cannot
make unnamed files (or ``/proc`` is missing) the bytes go to a hidden temporary sibling
(``.<name>.<random>.partial``) renamed onto the target; a kill mid-write leaves that sibling, which
:func:`is_partial` recognises so the next call removes it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

#: Suffix of write_atomic's temporary siblings (``.<name>.<random>.partial``).
PARTIAL_SUFFIX = ".partial"
#: Permission bits of written files (as ``tempfile.mkstemp`` makes them: the owner only).
FILE_MODE = 0o600
#: ``open(2)`` errors that mean "this file system makes no unnamed files" (then the sibling way is used).
_NO_UNNAMED = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL}


def is_partial(path: Path) -> bool:
    """True for a temporary sibling of :func:`write_atomic`: what a process killed mid-write
    (SIGKILL, power loss) leaves behind where files cannot be written unnamed. Never a finished
    file: those appear only whole."""
    return path.name.startswith(".") and path.name.endswith(PARTIAL_SUFFIX)


def write_atomic(target: Path, chunks: Iterable[bytes]) -> tuple[int, str]:
    """Write ``chunks`` to ``target`` so that it appears whole or not at all (an existing
    ``target`` is replaced in one step).

    Returns (bytes written, sha256 hex of them). On any failure (including an exception
    raised by ``chunks``) nothing new is left in the folder and ``target`` is as it was.
    The folder of ``target`` must exist; its errors (missing, not writable) raise ``OSError``.
    """
    fd = _unnamed_file(target.parent)
    if fd is None:
        return _via_sibling(target, chunks)
    with os.fdopen(fd, "wb") as handle:  # closing an unnamed file that was never linked deletes it
        result = _copy(chunks, handle)
        handle.flush()
        _link(f"/proc/self/fd/{fd}", target)
    return result


def _copy(chunks: Iterable[bytes], handle: BinaryIO) -> tuple[int, str]:
    digest = hashlib.sha256()
    written = 0
    for chunk in chunks:
        handle.write(chunk)
        digest.update(chunk)
        written += len(chunk)
    return written, digest.hexdigest()


@functools.cache
def _root_fd() -> int | None:
    """A descriptor of ``/`` (kept for the process's life) when unnamed files can be linked here, else None.

    Passed as ``src_dir_fd`` only so that ``os.link`` calls ``linkat(..., AT_SYMLINK_FOLLOW)``: without a
    directory descriptor CPython calls ``link(2)``, which links the ``/proc`` symlink itself and fails."""
    if not hasattr(os, "O_TMPFILE") or os.link not in os.supports_dir_fd or not os.path.isdir("/proc/self/fd"):
        return None
    return os.open("/", os.O_RDONLY | os.O_DIRECTORY)


def _unnamed_file(folder: Path) -> int | None:
    """A descriptor of a new unnamed file in ``folder``, or None where the file system makes none."""
    if _root_fd() is None:
        return None
    try:
        return os.open(folder, os.O_TMPFILE | os.O_WRONLY, FILE_MODE)
    except OSError as exc:
        if exc.errno in _NO_UNNAMED:
            return None
        raise


def _link(source: str, target: Path) -> None:
    """Give the unnamed file ``source`` (``/proc/self/fd/N``) the name ``target``; an existing
    ``target`` is replaced through a hidden sibling name and a rename."""
    try:
        os.link(source, target, src_dir_fd=_root_fd(), follow_symlinks=True)
        return
    except FileExistsError:
        pass
    for _ in range(100):  # a random name taken 100 times over means something else is wrong: say so
        sibling = target.parent / f".{target.name}.{uuid.uuid4().hex[:12]}{PARTIAL_SUFFIX}"
        try:
            os.link(source, sibling, src_dir_fd=_root_fd(), follow_symlinks=True)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name beside the file", str(target))
    try:
        os.replace(sibling, target)
    except BaseException:
        with contextlib.suppress(OSError):
            sibling.unlink()
        raise


def _via_sibling(target: Path, chunks: Iterable[bytes]) -> tuple[int, str]:
    """:func:`write_atomic` where the folder makes no unnamed files: a hidden temporary sibling renamed onto
    ``target``, removed on failure."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=PARTIAL_SUFFIX)
    partial = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            result = _copy(chunks, handle)
        os.replace(partial, target)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    return result
