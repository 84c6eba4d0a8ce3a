"""Checkpoint tools: list a run's checkpoints with where they live on its volume (:func:`list_checkpoints`),
and download one into a folder, verified and resumable (:func:`download_checkpoint`).

Facts and their sources:

- Checkpoints: GET ``/rft/runs/{id}/checkpoints`` (reference/prime-api.md §2.3): ``step``, ``status`` (READY,
  PENDING, UPLOADING, FAILED), ``sizeBytes``. The run's volume: ``volumeName`` of GET ``/rft/runs/{id}``.
- On the volume a checkpoint is the folder ``runs/<runId>/checkpoints/step_<n>/`` (docs/hosted-training
  pause-resume; prime 0.18.0 ``commands/volumes.py`` module docstring: a run writes under ``runs/<runId>/``).
  The files reach the volume's storage once the run ends or pauses and the volume has synced (``prime volumes
  ls``: "A live read-write session or run's changes appear once it ends").
- Storage is read as ``prime volumes get`` reads it (:mod:`tools.platform.storage`, :mod:`tools.core` volume
  reads): a transfer route's scoped credentials, refreshed before they expire.
- Format: since prime-rl #3316 (2026-08-20) the trainer writes DCP (``torch.distributed.checkpoint``) only; a
  Hugging Face model is made from it with prime-rl's ``scripts/dcp_to_hf.py`` (reference/platform-docs.md).

Decisions where the platform is silent: a download refuses the whole checkpoint (writes nothing) when one key
is not a safe relative path, where the CLI skips such keys: a checkpoint missing a shard looks complete and
is not. Files already in ``dest`` are checked by MD5 again on every call (a changed file is fetched again).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.core import (
    INT64_MAX,
    RUN_ID,
    Context,
    fit_largest,
    open_volume,
    prime_command,
    require_run,
    require_run_on_404,
    tool,
)
from tools.errors import Call, call, fail
from tools.guardrails.text import shown
from tools.monitor import _ckpt_files as cf
from tools.platform import errors as perr
from tools.platform import wire
from tools.units import Bytes

if TYPE_CHECKING:  # annotations only: boto3 loads when a reader is built
    from tools.platform.storage import VolumeReader

#: Bytes of one part (the CLI's ``_R2_PART_SIZE``) and parts in flight (measured: benchmarks/bench_checkpoints.py).
PART_BYTES = 64 * 2**20
WORKERS = 8
#: Our folder inside dest, and the manifest there (:mod:`._ckpt_files`).
STATE_DIR, MANIFEST = cf.STATE_DIR, cf.MANIFEST

#: How a person or an agent is told what the files are.
DCP_NOTE = ("DCP checkpoint (torch.distributed.checkpoint, prime-rl's format since 2026-08): not loadable as "
            "Hugging Face weights as is; convert it with prime-rl's scripts/dcp_to_hf.py.")
_STEP = re.compile(r"^step_(\d+)/")


def checkpoint_path(run_id: str, step: int) -> str:
    """The folder of a checkpoint on the run's volume: ``runs/<runId>/checkpoints/step_<n>/``."""
    return f"runs/{run_id}/checkpoints/step_{step}/"


# -- mf_list_checkpoints -------------------------------------------------------------------------------


class ListCheckpointsInput(BaseModel):
    """Which run's checkpoints."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    status: Literal["READY", "PENDING", "UPLOADING", "FAILED"] | None = Field(default=None, description=(
        "Only checkpoints with this status (sent as status_filter)."))
    files: bool = Field(default=False, description="Also count each one's files on the run's volume (reads storage).")


class CheckpointRow(BaseModel):
    """One checkpoint (GET ``/rft/runs/{id}/checkpoints``) and where it lives on the run's volume."""

    checkpoint_id: str = Field(description="Checkpoint id.")
    step: int | None = Field(default=None, description="Training step it was saved at.")
    status: str | None = Field(default=None, description="READY | PENDING | UPLOADING | FAILED | other.")
    size_bytes: Bytes | None = Field(default=None, description="Size in bytes, when known.")
    storage_url: str | None = Field(default=None, description="Where the platform says it is stored.")
    path: str | None = Field(default=None, description="Its folder on the run's volume (null: no volume).")
    files: int | None = Field(default=None, description="Files on the volume (with files=true; 0 = not synced yet).")
    stored_bytes: Bytes | None = Field(default=None, description="Bytes of those files (with files=true).")
    created_at: datetime | None = Field(default=None, description="When it was saved (UTC).")
    uploaded_at: datetime | None = Field(default=None, description="When its upload finished (UTC).")


class ListCheckpointsResult(BaseModel):
    """A run's checkpoints, newest step first."""

    run_id: str = Field(description="Run id.")
    volume: str | None = Field(default=None, description="The run's volume (null: none, nothing to download).")
    team_id: str | None = Field(default=None, description="The run's team (owner of the volume).")
    checkpoints: list[CheckpointRow] = Field(description="Checkpoints, highest step first.")
    total: int = Field(description="Checkpoints matching the filter.")
    latest_ready_step: int | None = Field(default=None, description="Highest step with a READY checkpoint.")
    total_size_bytes: Bytes = Field(description="Sum of known sizes, in bytes.")
    files_note: str | None = Field(default=None, description="Why files were not counted, when asked and not.")
    next_calls: list[Call] = Field(default_factory=list, description="The download of the latest READY one.")
    truncated: bool = Field(default=False, description="True when older checkpoints were left out to fit the budget.")
    omitted: int = Field(default=0, description="Older checkpoints left out.")
    narrow_hint: str | None = Field(default=None, description="How to ask for less.")


@tool
def list_checkpoints(inp: ListCheckpointsInput, ctx: Context) -> ListCheckpointsResult:
    """List a run's checkpoints (GET ``/rft/runs/{id}/checkpoints?status_filter=``), newest first, with each
    one's folder on the run's volume; ``files``: also one storage listing of ``runs/<id>/checkpoints/`` to count
    each one's files and bytes there.

    Errors: ``not_found``, the platform codes; with ``files``, those of the volume's route
    (``volume_not_found``, ``transfer_unavailable``, ``forbidden``, ``conflict``).
    """
    run = require_run(ctx, inp.run_id)
    with require_run_on_404(ctx, inp.run_id):
        items = ctx.platform().list_checkpoints(inp.run_id, status_filter=inp.status)
    items.sort(key=lambda c: c.step if c.step is not None else -1, reverse=True)
    volume = run.volume_name
    stored: dict[int, list[int]] | None = None
    note = None
    if inp.files and volume:
        stored = _stored_steps(ctx, run)
    elif inp.files:
        note = "The run has no volume: its checkpoints are not on any volume to list."
    rows = [CheckpointRow(
        checkpoint_id=c.id, step=c.step, status=c.status, size_bytes=c.size_bytes, storage_url=c.storage_url,
        path=checkpoint_path(run.id, c.step) if volume and c.step is not None else None,
        files=len(stored.get(c.step, [])) if stored is not None and c.step is not None else None,
        stored_bytes=sum(stored.get(c.step, [])) if stored is not None and c.step is not None else None,
        created_at=c.created_at, uploaded_at=c.uploaded_at) for c in items]
    ready = [c.step for c in items if (c.status or "").upper() == "READY" and c.step is not None]
    fetch = [call("mf_download_checkpoint", run_id=run.id, dest=f"checkpoint-{run.id}")] if ready and volume else []

    def build(k: int) -> ListCheckpointsResult:
        cut = len(rows) - k
        return ListCheckpointsResult(
            run_id=inp.run_id, volume=volume, team_id=run.team_id, checkpoints=rows[:k], total=len(rows),
            latest_ready_step=max(ready) if ready else None, total_size_bytes=sum(c.size_bytes or 0 for c in items),
            files_note=note, next_calls=fetch, truncated=cut > 0, omitted=cut,
            narrow_hint="Ask for the READY ones only (status READY)." if cut else None)

    return fit_largest(build, len(rows))


def _stored_steps(ctx: Context, run: wire.RLRun) -> dict[int, list[int]]:
    """Sizes of the files under each ``step_<n>/`` of the run's checkpoints folder on its volume."""
    base = f"runs/{run.id}/checkpoints/"
    found: dict[int, list[int]] = {}
    with open_volume(ctx, run.volume_name or "", run.team_id, path=base, connections=2) as reader:
        for obj in reader.iter_objects(base):
            match = _STEP.match(obj.key[len(base):])
            if match and not obj.key.endswith("/"):
                found.setdefault(int(match.group(1)), []).append(obj.size)
    return found


# -- mf_download_checkpoint ------------------------------------------------------------------------------


class DownloadCheckpointInput(BaseModel):
    """Which checkpoint of which run, and where to."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    dest: str = Field(min_length=1, max_length=1000, description=(
        "Folder for the checkpoint's files (created): new, empty, or an earlier download of the same checkpoint."))
    step: int | None = Field(default=None, ge=0, le=INT64_MAX, description="Checkpoint step; default: latest READY.")


class DownloadCheckpointResult(BaseModel):
    """What a checkpoint download put on disk and how it was checked."""

    run_id: str = Field(description="Run id.")
    step: int = Field(description="Training step of the checkpoint.")
    volume: str = Field(description="The run's volume it was read from.")
    path: str = Field(description="Its folder on the volume (runs/<run_id>/checkpoints/step_<n>/).")
    dest: str = Field(description="Absolute folder holding the checkpoint's files (the folder's contents).")
    manifest_path: str = Field(description=(
        "dest/.model-factory/manifest.jsonl: header, one line per file (file, bytes, etag, md5, verified), state."))
    files: int = Field(description="Files of the checkpoint, all on disk and verified.")
    bytes: Bytes = Field(description="Their total size in bytes.")
    files_downloaded: int = Field(description="Files fetched (whole or their missing parts) by this call.")
    files_kept: int = Field(description="Files already in dest that matched their checksum (not fetched).")
    refetched: int = Field(description="Files fetched again because a copy did not match its checksum.")
    parts_fetched: int = Field(description="Parts (up to 64 MiB each) fetched by this call.")
    parts_resumed: int = Field(description="Parts an interrupted call had fetched, kept.")
    fetched_bytes: Bytes = Field(description="Bytes fetched by this call.")
    md5_verified: int = Field(description="Files whose MD5 matched the store's checksum.")
    size_verified_only: int = Field(description="Files the store gives no checksum for: checked by size only.")
    credential_refreshes: int = Field(description="Times the storage credentials were renewed during the call.")
    format: str = Field(description="What the files are and how to make Hugging Face weights of them.")
    next_step: str = Field(description="What to do with it.")


@tool
def download_checkpoint(inp: DownloadCheckpointInput, ctx: Context) -> DownloadCheckpointResult:
    """Download one checkpoint of a run (default: the latest READY) from the run's volume into ``dest``.

    Reads GET ``/rft/runs/{id}`` (volume, team), GET ``/rft/runs/{id}/checkpoints`` (the step's status), one
    transfer route (and one per credential refresh), then storage: ListObjectsV2 of the checkpoint's folder,
    HeadObject per file (checksum, mtime), ranged GetObject per part. Every file is written in parts to
    ``dest/.model-factory/partial/``, verified (size, and the MD5 the store gives), and renamed into place whole;
    a killed or failed call leaves a journal the next call resumes from (only missing parts are fetched), and
    files already there are verified again. Progress: ``ctx.report(bytes done, bytes total, ...)``.

    Errors: ``not_found`` (run, or no checkpoint at that step), ``no_volume``, ``checkpoint_not_ready`` (not
    READY, or READY but not synced to the volume yet), ``volume_not_found``, ``transfer_unavailable`` (an older
    platform, or a read-write session holds the volume), ``forbidden``, ``conflict`` (the volume is busy, or a
    file changed during the download), ``unsafe_path`` (a key that is not a safe file path, a symbolic link in
    dest: nothing written), ``checksum_mismatch`` (a file still differs after a second fetch), ``bad_arguments``
    (dest not new, empty or ours), ``file_error`` (not enough free disk), ``unavailable`` (retryable: call again to
    resume), the platform codes.
    """
    run = require_run(ctx, inp.run_id)
    if not run.volume_name:
        raise fail("no_volume", f"Run {run.id} has no named volume: its outputs, checkpoints included, stay on a "
                   "disk of the run's own that cannot be downloaded.",
                   "Launch the next run with a volume (the volume of mf_plan_run, created with `prime volumes create "
                   "NAME`, needs the prime CLI) to keep its checkpoints.")
    step = _pick_step(ctx, run, inp.step)
    path = checkpoint_path(run.id, step)
    again = call("mf_download_checkpoint", run_id=run.id, dest=inp.dest, step=step)
    dest = _prepare_dest(ctx.resolve_path(inp.dest), run.id, step)
    with open_volume(ctx, run.volume_name, run.team_id, path=path, connections=WORKERS) as reader:
        objects = _plan(ctx, reader, run, step, path, dest)
        counts = cf.Counts()
        header = {"kind": "header", "format": cf.FORMAT, "run_id": run.id, "step": step, "volume": run.volume_name,
                  "team_id": run.team_id, "path": path, "created_at": cf._now()}
        journal = cf.Journal.read(dest / cf.MANIFEST, header)
        jobs = _jobs(dest, objects, journal, counts)
        total = sum(o.size for o in objects.values())
        need = sum(j.obj.size - sum(j.span(i)[1] - j.span(i)[0] + 1 for i in j.done) for j in jobs)
        if need > cf.free_bytes(dest):
            raise fail("file_error", f"The checkpoint needs {need} more bytes in {dest}; the disk has "
                       f"{cf.free_bytes(dest)} free. Nothing was written.",
                       "Free disk space or pass a dest on a larger disk, then call again.")
        transfer = cf.Transfer(ctx, reader, journal, jobs, total, counts, WORKERS)
        transfer.files_total = len(objects)
        transfer.files_done = len(objects) - len(jobs)
        journal.begin()
        state = "interrupted"
        try:
            transfer.run()
            state = "finished" if not transfer.mismatched else "interrupted"
        except perr.Unavailable as exc:
            raise fail("unavailable", f"The download of checkpoint step {step} of run {run.id} stopped: "
                       f"{exc.message}. {counts.parts_fetched} part(s) landed and are kept.",
                       f"Call {again} again: it fetches only what is missing.", retryable=True,
                       next_calls=[again]) from None
        except perr.Conflict as exc:
            raise fail("conflict", f"A file of the checkpoint changed on the volume during the download "
                       f"({exc.message}).", f"Call {again} again: changed files are fetched whole.",
                       retryable=True, next_calls=[again]) from None
        finally:
            journal.finish(state)
        refreshes = reader.refreshes
    if transfer.mismatched:
        raise fail("checksum_mismatch", f"{len(transfer.mismatched)} file(s) of the checkpoint arrived twice with "
                   f"bytes that do not match the checksum the store gives (e.g. {shown(transfer.mismatched[0])}); "
                   "they were not kept. The other files are in place.",
                   f"Call {again} again later; if it persists the copy on the volume is damaged: ask its owner "
                   f"(`{prime_command(['volumes', 'ls', '-l', run.volume_name, path], run.team_id)}` shows it).",
                   next_calls=[again])
    rows = list(journal.files.values())
    return DownloadCheckpointResult(
        run_id=run.id, step=step, volume=run.volume_name, path=path, dest=str(dest),
        manifest_path=str(dest / cf.MANIFEST), files=len(objects), bytes=total,
        files_downloaded=counts.files_fetched, files_kept=counts.files_kept, refetched=counts.refetched,
        parts_fetched=counts.parts_fetched, parts_resumed=counts.parts_resumed, fetched_bytes=counts.fetched_bytes,
        md5_verified=sum(r.get("verified") == "md5" for r in rows),
        size_verified_only=sum(r.get("verified") == "size" for r in rows), credential_refreshes=refreshes,
        format=DCP_NOTE,
        next_step=f"The checkpoint is in {dest}. To serve or share it as a model, convert it to Hugging Face "
                  "weights with prime-rl's scripts/dcp_to_hf.py; to continue training, resume the run.")


def checkpoint_download(dest: Path) -> dict | None:
    """What a folder :func:`download_checkpoint` wrote holds, from its manifest: ``run_id``, ``step``,
    ``volume``, ``state`` (the last state line), ``files``, ``bytes``, ``md5_verified``; None when the folder has
    no manifest of this format."""
    journal = cf.Journal.read(dest / cf.MANIFEST, {})
    try:
        lines = (dest / cf.MANIFEST).read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
    if not isinstance(header, dict) or header.get("format") != cf.FORMAT:
        return None
    state = None
    for line in reversed(lines):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("kind") == "state":
            state = item.get("state")
            break
    files = list(journal.files.values())
    return {"run_id": header.get("run_id"), "step": header.get("step"), "volume": header.get("volume"),
            "state": state, "files": len(files), "bytes": sum(int(f.get("bytes") or 0) for f in files),
            "md5_verified": sum(f.get("verified") == "md5" for f in files)}


def _pick_step(ctx: Context, run: wire.RLRun, step: int | None) -> int:
    """The step asked for (it must be READY), else the latest READY one."""
    with require_run_on_404(ctx, run.id):
        items = ctx.platform().list_checkpoints(run.id)
    listing = call("mf_list_checkpoints", run_id=run.id)
    ready = sorted(c.step for c in items if (c.status or "").upper() == "READY" and c.step is not None)
    if step is None:
        if ready:
            return ready[-1]
        what = f"{len(items)} checkpoint(s), none READY yet" if items else "no checkpoint yet"
        raise fail("checkpoint_not_ready", f"Run {run.id} ({run.status}) has {what}.",
                   f"Wait until {listing} shows one READY, then call again.", retryable=bool(items)
                   or not run.is_terminal(), next_calls=[listing])
    found = next((c for c in items if c.step == step), None)
    if found is None:
        steps = ", ".join(str(c.step) for c in sorted(items, key=lambda c: c.step or 0)) or "none"
        raise fail("not_found", f"Run {run.id} has no checkpoint at step {step} (steps with one: {steps}).",
                   f"Pick a step from {listing}.", next_calls=[listing])
    status = (found.status or "").upper()
    if status != "READY":
        failed = status == "FAILED"
        raise fail("checkpoint_not_ready", f"The checkpoint of run {run.id} at step {step} is {status or 'unknown'}"
                   + (": its upload failed." if failed else ", not READY yet."),
                   f"Pick another step from {listing}." if failed else f"Wait until {listing} shows it READY.",
                   retryable=not failed, next_calls=[listing])
    return step


def _prepare_dest(dest: Path, run_id: str, step: int) -> Path:
    """``dest`` resolved and checked: a folder (or to be made) that is new, empty, or our download of this
    checkpoint. ToolFailure ``bad_arguments`` otherwise; nothing is written here."""
    suggestion = f"checkpoint-{run_id}-step-{step}"
    under = next(p for p in dest.parents if p.exists() or p.is_symlink())
    if not under.is_dir():
        raise fail("bad_arguments", f"{shown(str(under))} is a file, not a folder, so dest cannot be made under it.",
                   f"Pass a dest whose folders are folders, e.g. {suggestion}.")
    if dest.exists() and not dest.is_dir():
        raise fail("bad_arguments", f"dest {shown(str(dest))} exists and is not a folder.",
                   f"Pass a new folder path (it is created), e.g. {suggestion}.")
    dest = dest.resolve()
    manifest = dest / cf.MANIFEST
    if manifest.is_file() and not manifest.is_symlink():
        first = manifest.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        if f'"run_id":"{run_id}"' not in first or f'"step":{step},' not in first:
            raise fail("bad_arguments", f"dest {shown(str(dest))} holds another checkpoint's download "
                       f"({shown(first[:160])}).", f"Pass another folder, e.g. {suggestion}.")
    elif dest.exists() and any(dest.iterdir()):
        raise fail("bad_arguments", f"dest {shown(str(dest))} is not empty and holds no download of this tool; "
                   "nothing was written.", f"Pass a new or empty folder, e.g. {suggestion}.")
    return dest


def _plan(ctx: Context, reader: VolumeReader, run: wire.RLRun, step: int, path: str,
          dest: Path) -> dict[str, cf.StoredObject]:
    """Every file of the checkpoint on the volume (relative path -> object with checksum and mtime), all keys
    checked safe and dest checked for links before anything is written."""
    objects: dict[str, cf.StoredObject] = {}
    unsafe: list[tuple[str, str]] = []
    dirs: list[str] = []
    for obj in reader.iter_objects(path):
        if not obj.key.startswith(path):
            unsafe.append((obj.key, "outside the checkpoint's folder"))
            continue
        rel = obj.key[len(path):]
        if not rel:
            continue  # the folder's own marker
        reason = cf.unsafe_reason(rel)
        if reason:
            unsafe.append((rel, reason))
        elif rel.endswith("/"):
            dirs.append(rel)
        else:
            objects[rel] = obj
    if unsafe:
        rel, reason = unsafe[0]
        ls = prime_command(["volumes", "ls", "-l", "-R", run.volume_name or "", path], run.team_id)
        raise fail("unsafe_path", f"{len(unsafe)} object(s) of checkpoint step {step} have names that are not safe "
                   f"file paths (e.g. {shown(rel)!r}: {reason}). Nothing was written.",
                   f"Have the volume's owner rename or remove them (`{ls}` shows them, needs the prime CLI); "
                   "`prime volumes get` would copy the rest, skipping those.")
    if not objects:
        state = "" if run.is_terminal() else f" The run is {run.status}: files appear once it ends or pauses."
        listing = call("mf_list_checkpoints", run_id=run.id, files=True)
        raise fail("checkpoint_not_ready", f"Checkpoint step {step} of run {run.id} is READY but its files are not "
                   f"on volume {run.volume_name!r} yet ({path} is empty): the volume syncs after the run ends or "
                   f"pauses.{state}", f"Call again in a minute; {listing} shows when the files are there.",
                   retryable=True, next_calls=[listing])
    cf.refuse_linked(dest, [*objects, *dirs])
    for rel in dirs:
        (dest / rel).mkdir(parents=True, exist_ok=True)
    return {rel: reader.head(obj.key) for rel, obj in sorted(objects.items())}


def _jobs(dest: Path, objects: dict[str, cf.StoredObject], journal: cf.Journal, counts: cf.Counts) -> list[cf.FileJob]:
    """The files not on disk yet (or that no longer match), with the parts an earlier call left."""
    jobs = []
    for rel, obj in objects.items():
        final = dest / rel
        if final.exists():
            if cf.local_ok(final, obj):
                counts.files_kept += 1
                journal.files[rel] = {"kind": "file", "file": rel, "bytes": obj.size, "etag": obj.etag,
                                      "md5": obj.md5(), "verified": "md5" if obj.md5() else "size"}
                continue
            counts.refetched += 1
            final.unlink()
        partial = cf.partial_path(dest, rel)
        done = journal.parts.get((rel, str(obj.etag)), set()) if partial.is_file() else set()
        if partial.is_file() and partial.stat().st_size != obj.size:
            done = set()
        job = cf.FileJob(rel, obj, final, partial, PART_BYTES)
        job.done = {i for i in done if i < job.parts}
        jobs.append(job)
    return jobs
