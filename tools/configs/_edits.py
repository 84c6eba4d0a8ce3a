"""What ``mf_prepare_config`` does to the copy: hosted-run edits with tomlkit (comments, key order
and value types kept), and the write that never replaces an existing file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

import tomlkit
from pydantic import BaseModel, Field

from tools.configs._facts import SFT_ONLINE_EVAL_KEYS, Mode
from tools.configs._toml import toml_text
from tools.errors import FieldProblem, call, fail


class Change(BaseModel):
    """One edit :func:`prepare_config` made to the copy."""

    path: str = Field(description="Dotted TOML location.")
    action: Literal["removed", "set", "added"] = Field(description="removed, set (existing key) or added (new key).")
    old: str | None = Field(default=None, description="Previous value as TOML text (null when added).")
    new: str | None = Field(default=None, description="New value as TOML text (null when removed).")


def _set(container: Any, key: str, value: Any, where: str, changes: list[Change]) -> None:
    """Set ``container[key]`` keeping its position (a new top-level key goes after the last
    existing top-level key, not under a table's comment)."""
    old = container.get(key)
    if old is not None:
        if old == value:
            return
        container[key] = value
        changes.append(Change(path=where, action="set", old=toml_text(old), new=toml_text(value)))
        return
    if isinstance(container, tomlkit.TOMLDocument):
        container._insert_at(_top_level_slot(container), key, value)  # noqa: SLF001 - no public "insert at"
    else:
        container[key] = value
    changes.append(Change(path=where, action="added", new=toml_text(value)))


def _top_level_slot(doc: tomlkit.TOMLDocument) -> int:
    """Body index just after the last top-level ``key = value`` (before the first table);
    0 when there is none. Assigning ``doc[key]`` instead would land under the comment that
    introduces the first table, or after an out-of-order table."""
    slot = 0
    for index, (key, item) in enumerate(doc.body):
        if isinstance(item, (tomlkit.items.Table, tomlkit.items.AoT)):
            break
        if key is not None and not isinstance(item, (tomlkit.items.Whitespace, tomlkit.items.Comment)):
            slot = index + 1
    return slot


def _remove(container: Any, key: str, where: str, changes: list[Change]) -> None:
    if key in container:
        old = container[key]
        shown = "[table]" if isinstance(old, (tomlkit.items.Table, tomlkit.items.AoT)) else toml_text(old)
        del container[key]
        changes.append(Change(path=where, action="removed", old=shown))


def edit(doc: tomlkit.TOMLDocument, mode: Mode, *, gpu_type: str | None = None, num_train_gpus: int | None = None,
         num_infer_gpus: int | None = None, max_steps: int | None = None, name: str | None = None) -> list[Change]:
    """Apply the hosted-run edits of ``mf_prepare_config`` to ``doc`` in place (arguments: its input
    fields; None keeps the example's value) and return them. Raises ToolFailure ``bad_arguments``
    for GPU counts on a multi_node example."""
    changes: list[Change] = []
    for key in ("slurm", "output_dir", "clean", "dry_run", "k8s"):
        _remove(doc, key, key, changes)
    if mode == "sft":  # hosted SFT is trainer-only (rule sft_online_eval)
        for key in SFT_ONLINE_EVAL_KEYS:
            _remove(doc, key, key, changes)
        if hasattr(doc.get("deployment"), "keys"):
            for key in ("num_infer_gpus", "num_eval_gpus"):
                _remove(doc["deployment"], key, f"deployment.{key}", changes)
    run = doc.get("run")
    if run is not None and hasattr(run, "keys"):
        _remove(run, "dir", "run.dir", changes)
        if len(run) == 0:
            _remove(doc, "run", "run", changes)
    deployment = doc.get("deployment")
    if num_train_gpus is not None or num_infer_gpus is not None:
        kind = deployment.get("type", "single_node") if hasattr(deployment, "get") else "single_node"
        if kind != "single_node":
            raise fail("bad_arguments", f"This example is a {kind} deployment: its size is set in nodes, not with "
                       "num_train_gpus/num_infer_gpus.",
                       "Leave the GPU counts unset, or start from a single_node example (mf_list_examples lists "
                       "them), then edit [deployment] by hand.",
                       fields=[FieldProblem(path="num_train_gpus", problem="single_node examples only")])
        if deployment is None:
            deployment = tomlkit.table()
            doc["deployment"] = deployment
            changes.append(Change(path="deployment", action="added", new="[table]"))
        for key, value in (("num_train_gpus", num_train_gpus), ("num_infer_gpus", num_infer_gpus)):
            if value is not None:
                _set(deployment, key, value, f"deployment.{key}", changes)
    if gpu_type is not None:
        _set(doc, "gpu_type", gpu_type, "gpu_type", changes)
    if max_steps is not None:
        _set(doc, "max_steps", max_steps, "max_steps", changes)
        for sub in ("trainer", "orchestrator") if mode == "rl" else ():
            table = doc.get(sub)
            if hasattr(table, "get") and table.get("max_steps") is not None:
                _set(table, "max_steps", max_steps, f"{sub}.max_steps", changes)
    if name is not None:
        _set(doc, "name", name, "name", changes)
    return changes


def write_new_file(dest: Path, data: bytes) -> None:
    """Write ``data`` to ``dest`` atomically, never replacing an existing file.

    ``dest``'s folder must exist (it is never created). Temp file in the same folder, fsync, then
    ``os.link`` (fails if ``dest`` exists, so a
    file created meanwhile is never overwritten); the temp file is always removed. Raises
    ToolFailure ``dest_exists`` / ``write_failed``; on any failure ``dest`` is untouched.
    """
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, dest)
        except FileExistsError:
            raise dest_exists(dest) from None
        except OSError:  # no hard links on this file system: check, then rename
            if dest.exists():
                raise dest_exists(dest) from None
            os.replace(tmp, dest)
    except OSError as exc:
        raise fail("write_failed", f"Could not write {dest}: {exc.strerror or exc}.",
                   "Pick a destination in a writable folder and copy again.") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def dest_exists(dest: Path) -> Exception:
    check = call("mf_validate_config", config_path=str(dest))
    return fail("dest_exists", f"{dest} already exists; mf_prepare_config never overwrites a file.",
                f"Pass a new destination path (e.g. add a suffix), or check and edit the existing file: {check}.",
                next_calls=[check])

