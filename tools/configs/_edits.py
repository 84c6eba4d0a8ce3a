"""What ``mf_prepare_config`` does to the copy: hosted-run edits with tomlkit (comments, key order
and value types kept), where it may go (:func:`folders_to_create`: a new .toml file, its missing
folders made as ``mkdir -p`` would), and the write that never replaces an existing file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import tomlkit
from pydantic import BaseModel, Field

from tools.configs._facts import SFT_ONLINE_EVAL_KEYS, Mode
from tools.configs._toml import toml_text
from tools.errors import Call, FieldProblem, ToolFailure, call, fail


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
        kind = deployment.get("type", "single_node") if isinstance(deployment, Mapping) else "single_node"
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
            if isinstance(table, Mapping) and table.get("max_steps") is not None:
                _set(table, "max_steps", max_steps, f"{sub}.max_steps", changes)
    if name is not None:
        _set(doc, "name", name, "name", changes)
    return changes


def free_name(folder: Path, stem: str) -> Path:
    """``folder/<stem>.toml``, or ``<stem>-2.toml``, ``-3`` ... the first name nothing has in ``folder``."""
    for n in range(1, 100):
        path = folder / f"{stem}{'' if n == 1 else f'-{n}'}.toml"
        if not os.path.lexists(path):
            return path
    return folder / f"{stem}-{os.getpid()}.toml"


def folders_to_create(dest: Path, stem: str, cwd: Path, again: Callable[[Path], Call]) -> list[Path]:
    """Where ``dest`` may be written: the folders to create for it (outermost first; ``[]`` when its
    folder exists), after refusing, with the path named and a call that works instead (``again(path)``;
    a new name from ``stem``, the source's name, via :func:`free_name`):

    - ``dest_exists``: a file (or a link) is there; it is never overwritten;
    - ``bad_arguments``: ``dest`` is a folder (a name inside it is offered), a FIFO, device or socket
      (one in the working folder ``cwd``), a path under a file (one beside that file), or a name not
      ending in ``.toml`` (the same name with ``.toml``).
    """
    def refuse(message: str, problem: str, instead: Path, what: str) -> ToolFailure:
        retry = again(instead)
        return fail("bad_arguments", message, f"Pass {what}, e.g. {retry}.", next_calls=[retry],
                    fields=[FieldProblem(path="dest", problem=problem)])

    try:
        os.lstat(dest)
        taken = True
    except (FileNotFoundError, NotADirectoryError):  # under a file: said below
        taken = False
    except OSError as exc:
        raise fail("write_failed", f"Cannot look at {dest}: {exc.strerror or exc}.",
                   "Pick a destination in a folder you can write to, then call again.") from None
    if taken:
        with contextlib.suppress(OSError):  # a link to nothing is a name taken all the same
            mode = os.stat(dest).st_mode
            if stat.S_ISDIR(mode):
                raise refuse(f"{dest} is a folder; mf_prepare_config writes a new file, never in a folder's place.",
                             "is a folder, not a new file", free_name(dest, stem), "the path of the new file inside it")
            if not stat.S_ISREG(mode):
                raise refuse(f"{dest} is not a regular file (a pipe, device or socket); mf_prepare_config writes a "
                             "new .toml file and never into one.", "is a pipe, device or socket, not a new file",
                             free_name(cwd, stem), "the path of a new .toml file")
        raise dest_exists(dest)
    missing: list[Path] = []
    folder = dest.parent
    while True:
        try:
            folder_mode = os.stat(folder).st_mode
        except (FileNotFoundError, NotADirectoryError):
            missing.insert(0, folder)
            folder = folder.parent
            continue
        except OSError as exc:
            raise fail("write_failed", f"Cannot look at {folder}: {exc.strerror or exc}.",
                       "Pick a destination in a folder you can write to, then call again.") from None
        break
    if not stat.S_ISDIR(folder_mode):
        beside = folder.parent / dest.name if not os.path.lexists(folder.parent / dest.name) else \
            free_name(folder.parent, stem)
        raise refuse(f"{folder} is a file, not a folder, so {dest} cannot be written under it.",
                     "a file stands where a folder of it would be", beside, "a path in a folder")
    if dest.suffix != ".toml":  # not shown: a value that is no file name may be a secret pasted in the wrong place
        raise refuse("The destination (not shown: it may be a value pasted in the wrong place) does not end in "
                     ".toml; mf_prepare_config writes a prime-rl .toml file.",
                     "must end in .toml", free_name(dest.parent, stem), "a path ending in .toml")
    return missing


def make_folders(folders: list[Path]) -> list[Path]:
    """Create ``folders`` (outermost first, as from :func:`folders_to_create`) as ``mkdir -p`` would:
    the ones this call made (one made meanwhile by someone else is not counted). Raises ToolFailure
    ``write_failed`` naming the folder, after removing the ones it made."""
    made: list[Path] = []
    for folder in folders:
        try:
            folder.mkdir()
            made.append(folder)
        except FileExistsError:
            if not folder.is_dir():
                remove_folders(made)
                raise fail("write_failed", f"{folder} appeared meanwhile, and is not a folder.",
                           "Pick another destination, then call again.") from None
        except OSError as exc:
            remove_folders(made)
            raise fail("write_failed", f"Could not create the folder {folder}: {exc.strerror or exc}.",
                       "Pick a destination in a folder you can write to, then call again.") from None
    return made


def remove_folders(made: list[Path]) -> None:
    """Remove the folders :func:`make_folders` made, innermost first, each only while empty."""
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()


def write_new_file(dest: Path, data: bytes) -> None:
    """Write ``data`` to ``dest`` atomically, never replacing an existing file.

    ``dest``'s folder must exist (:func:`make_folders` creates it first). Temp file in the same folder,
    fsync, then ``os.link`` (fails if ``dest`` exists, so a
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

