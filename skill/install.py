"""``model-factory install-skill``: copy the skill text where an agent looks for skills.

The skill is ``SKILL.md`` plus ``references/*.md`` (Agent Skills spec). It is installed
into ``<dest>/<name>/``, where ``<name>`` is the ``name`` in SKILL.md's frontmatter (the spec
requires the folder to be called like the skill). Sources: a wheel carries the files in
``skill/pack/`` (pyproject ``force-include``); a source checkout has them at the repository
root.

Writes are atomic: the copy is built in a hidden temporary folder next to the target and
renamed into place, so an agent never sees half a skill. An existing copy with the same
files is left alone; a different one is replaced only with ``force`` (the old folder is
renamed aside first and removed after the new one is in place).

Exit codes of :func:`main`: 0 installed or already up to date, 3 refused or failed.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

from skill.exit_codes import EXIT_OK, EXIT_TOOL_ERROR

#: Default skills folder (Claude Code, per user). Codex: ~/.codex/skills; per project: .claude/skills.
DEFAULT_DEST = "~/.claude/skills"
_PACKAGE_DIR = Path(__file__).resolve().parent
_FRONTMATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n", re.S)
_NAME = re.compile(r"^name:\s*['\"]?([a-z0-9]+(?:-[a-z0-9]+)*)['\"]?\s*$", re.M)
MCP_HINT = (
    "The skill calls the mf_* tools. Register the MCP server with your agent, e.g.\n"
    "  claude mcp add model-factory -- model-factory mcp\n"
    "(Cursor, Codex, Claude Desktop: see the MCP section of the model-factory-skill README), or let a shell-using\n"
    "agent run `model-factory <command> --json`."
)


class InstallError(Exception):
    """The skill could not be installed; the message says why and what to do."""


@dataclass(frozen=True)
class Installed:
    """Outcome of :func:`install`: ``path`` of the skill folder, ``status`` and the files
    (paths relative to the skill folder)."""

    path: Path
    status: Literal["installed", "replaced", "unchanged"]
    files: tuple[str, ...]


def pack_dir() -> Path:
    """The folder holding SKILL.md and references/: ``skill/pack`` in a wheel, else the
    source checkout's root. Raises InstallError when neither has them."""
    for candidate in (_PACKAGE_DIR / "pack", _PACKAGE_DIR.parent):
        if (candidate / "SKILL.md").is_file() and (candidate / "references").is_dir():
            return candidate
    raise InstallError("SKILL.md and references/ are not in this installation of model-factory-skill "
                       f"(looked in {_PACKAGE_DIR / 'pack'} and {_PACKAGE_DIR.parent}). Reinstall the package.")


def skill_name(skill_md: str) -> str:
    """The ``name`` of SKILL.md's YAML frontmatter (a plain scalar per the spec)."""
    front = _FRONTMATTER.match(skill_md)
    if front is None or not (match := _NAME.search(front[1])):
        raise InstallError("SKILL.md has no valid frontmatter `name`.")
    return match[1]


def pack_files(source: Path | None = None) -> dict[str, bytes]:
    """``{relative path: bytes}`` of the skill: SKILL.md and every file under references/
    (hidden files and ``__pycache__`` skipped)."""
    source = source or pack_dir()
    files = {"SKILL.md": (source / "SKILL.md").read_bytes()}
    for path in sorted((source / "references").rglob("*")):
        rel = path.relative_to(source)
        if path.is_file() and not any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
            files[rel.as_posix()] = path.read_bytes()
    return files


def _existing_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _remove(path: Path) -> None:
    """Delete a file, a symlink (not what it points to) or a folder tree."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


def _write_tree(folder: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())


def install(dest: str | os.PathLike[str] = DEFAULT_DEST, *, force: bool = False,
            source: Path | None = None) -> Installed:
    """Install the skill into ``<dest>/<name>/`` atomically.

    Returns ``unchanged`` when the same files are already there (nothing is written),
    ``installed`` for a new copy, ``replaced`` when ``force`` replaced a different one.
    Raises InstallError when a different copy (or a file, or a symlink) is in the way and
    ``force`` is false, or when writing fails; nothing is left half-written either way.
    """
    files = pack_files(source)
    name = skill_name(files["SKILL.md"].decode("utf-8"))
    root = Path(dest).expanduser().resolve()
    target = root / name
    present = target.exists() or target.is_symlink()
    if present and target.is_dir() and not target.is_symlink() and _existing_files(target) == files:
        return Installed(target, "unchanged", tuple(files))
    if present and not force:
        what = "a different copy of the skill" if target.is_dir() and not target.is_symlink() else \
            "a file or symlink"
        raise InstallError(f"{target} already holds {what}; nothing was changed. Run again with --force to "
                           "replace it (its files are removed).")
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.new-"))
    except OSError as exc:
        raise InstallError(f"Cannot write to {root}: {exc.strerror or exc}.") from None
    aside: Path | None = None
    try:
        _write_tree(staging, files)
        os.chmod(staging, 0o755)
        if present:
            aside = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.old-")) / name
            os.rename(target, aside)
        os.rename(staging, target)
    except OSError as exc:
        if aside is not None and not (target.exists() or target.is_symlink()):
            os.rename(aside, target)  # put the old copy back
            aside = None
        raise InstallError(f"Could not install into {target}: {exc.strerror or exc}; the previous state was "
                           "kept.") from None
    finally:
        _remove(staging)
        if aside is not None:
            _remove(aside.parent)
    return Installed(target, "replaced" if present else "installed", tuple(files))


def main(dest: str | os.PathLike[str] = DEFAULT_DEST, *, force: bool = False,
         out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``install`` and print where the skill went and how to connect the tools."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        result = install(dest, force=force)
    except InstallError as exc:
        print(f"Not installed: {exc}", file=err)
        return EXIT_TOOL_ERROR
    said = {"installed": "Installed", "replaced": "Replaced", "unchanged": "Already up to date:"}[result.status]
    print(f"{said} the {result.path.name} skill in {result.path} ({len(result.files)} files).", file=out)
    print(MCP_HINT, file=out)
    return EXIT_OK
