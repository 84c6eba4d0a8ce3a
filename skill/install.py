"""Connecting an agent: ``model-factory install-skill`` copies the skill text where the agent
looks for skills, ``model-factory mcp-config`` prints its MCP server entry.

The skill is ``SKILL.md`` plus ``references/*.md`` (Agent Skills spec). It is installed
into ``<dest>/<name>/``, where ``<name>`` is the ``name`` in SKILL.md's frontmatter (the spec
requires the folder to be called like the skill). ``dest`` is the agent's skills folder
(:data:`SKILL_FOLDERS`: per user, or per project with ``project``), or any folder given. Sources:
a wheel carries the files in ``skill/pack/`` (pyproject ``force-include``); a source checkout
has them at the repository root.

Ownership: the installed folder holds a marker of ours (:data:`MARKER`: the version, the absolute
path of the source checkout it came from, and each file's sha256). A folder without it (someone
else's skill of the same name, a file, a symlink) is never replaced, ``force`` or not. Our own
copy is upgraded when its files are as we wrote them, and replaced over local edits only with
``force``.

Writes are atomic: the copy is built in a hidden temporary folder next to the target and
renamed into place, so an agent never sees half a skill (the old folder is renamed aside
first and removed after the new one is in place).

Exit codes of :func:`main`: 0 installed or already up to date, 3 refused or failed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

from skill import terminal
from skill.exit_codes import EXIT_OK, EXIT_TOOL_ERROR

#: Each agent's skills folder: (per user, per project). Sources: the agents' skills documentation
#: (Claude Code; Codex reads ~/.agents/skills and .agents/skills; Cursor; OpenCode).
SKILL_FOLDERS: dict[str, tuple[str, str]] = {
    "claude-code": ("~/.claude/skills", ".claude/skills"),
    "codex": ("~/.agents/skills", ".agents/skills"),
    "cursor": ("~/.cursor/skills", ".cursor/skills"),
    "opencode": ("~/.config/opencode/skills", ".opencode/skills"),
}
#: Default skills folder (Claude Code, per user).
DEFAULT_DEST = SKILL_FOLDERS["claude-code"][0]
#: The file in an installed skill folder that says model-factory installed it (and which files).
MARKER = ".model-factory-install.json"
_PACKAGE_DIR = Path(__file__).resolve().parent
_FRONTMATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n", re.S)
_NAME = re.compile(r"^name:\s*['\"]?([a-z0-9]+(?:-[a-z0-9]+)*)['\"]?\s*$", re.M)


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


def source_checkout(source: Path | None = None) -> Path | None:
    """The model-factory-skill source checkout (a clone of its repository) the skill comes from, absolute:
    ``source`` (default :func:`pack_dir`) when it is one, else the local folder this package was installed
    from (``uv tool install /path/to/clone``: its ``direct_url.json``, PEP 610); None for an install from a
    wheel file or an index. A checkout is a folder whose ``pyproject.toml`` names the distribution."""
    for folder in (source or pack_dir(), _installed_from()):
        if folder is not None and _is_checkout(folder):
            return folder.resolve()
    return None


def _installed_from() -> Path | None:
    from importlib.metadata import PackageNotFoundError, distribution
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    try:
        data = json.loads(distribution("model-factory-skill").read_text("direct_url.json") or "null")
    except (PackageNotFoundError, ValueError):
        return None
    url = data.get("url") if isinstance(data, dict) else None
    return Path(url2pathname(urlparse(url).path)) if isinstance(url, str) and url.startswith("file://") else None


def _is_checkout(folder: Path) -> bool:
    import tomllib

    try:
        project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, ValueError):
        return False
    return isinstance(project, dict) and project.get("name") == "model-factory-skill"


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


def skills_folder(agent: str, project: bool = False, cwd: Path | None = None) -> Path:
    """``agent``'s skills folder: per user (under the home folder) or per project (under ``cwd``)."""
    user, proj = SKILL_FOLDERS[agent]
    return (cwd or Path.cwd()) / proj if project else Path(user).expanduser()


def _marker(files: dict[str, bytes], checkout: Path | None) -> bytes:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("model-factory-skill")
    except PackageNotFoundError:
        ours = "source"
    digests = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    return (json.dumps({"installed_by": "model-factory-skill", "version": ours,
                        "source_checkout": str(checkout) if checkout else None, "files": digests}, indent=2)
            + "\n").encode()


def _ours(target: Path) -> dict[str, str] | None:
    """The files our marker in ``target`` records (``{path: sha256}``), or None when ``target`` is
    not a plain folder holding our marker."""
    if target.is_symlink() or not target.is_dir():
        return None
    try:
        data = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) and data.get("installed_by") == "model-factory-skill" else None
    return files if isinstance(files, dict) else None


def install(dest: str | os.PathLike[str] = DEFAULT_DEST, *, force: bool = False,
            source: Path | None = None) -> Installed:
    """Install the skill into ``<dest>/<name>/`` atomically, with our marker (which also records the
    :func:`source_checkout` as ``source_checkout``, so the installed skill can name the clone to update).

    Returns ``unchanged`` when the same files are already there (nothing is written),
    ``installed`` for a new copy, ``replaced`` when our earlier copy was upgraded. Raises
    InstallError when something we did not install is in the way (a folder without our marker, a
    file, a symlink; ``force`` does not change that), when our copy was edited and ``force`` is
    false, or when writing fails; nothing is left half-written either way.
    """
    files = pack_files(source)
    name = skill_name(files["SKILL.md"].decode("utf-8"))
    root = Path(dest).expanduser().resolve()
    target = root / name
    present = target.exists() or target.is_symlink()
    recorded = _ours(target) if present else None
    if present and recorded is None:
        what = "a folder model-factory did not install" if target.is_dir() and not target.is_symlink() else \
            "a file or symlink"
        raise InstallError(f"{target} already holds {what}; nothing was changed. Remove it yourself if it is not "
                           "needed, or install into another folder (--dest).")
    marker = _marker(files, source_checkout(source))
    if recorded is not None:
        existing = {rel: data for rel, data in _existing_files(target).items() if rel != MARKER}
        if existing == files and (target / MARKER).read_bytes() == marker:
            return Installed(target, "unchanged", tuple(files))
        edited = {rel: hashlib.sha256(data).hexdigest() for rel, data in existing.items()} != recorded
        if edited and not force:
            raise InstallError(f"{target} holds model-factory's skill with local edits; nothing was changed. Run "
                               "again with --force to replace it (the edits are lost).")
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.new-"))
    except OSError as exc:
        raise InstallError(f"Cannot write to {root}: {exc.strerror or exc}.") from None
    aside: Path | None = None
    try:
        _write_tree(staging, {**files, MARKER: marker})
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


# -- the guard hook -------------------------------------------------------------------------

#: Agents whose host runs a hook before each shell command and file write, and the settings file the
#: hook goes in (per user): Claude Code's PreToolUse hooks in its user settings
#: (https://code.claude.com/docs/en/hooks), Codex's PreToolUse hooks in ~/.codex/hooks.json (same
#: protocol: ``tool_input.command`` on stdin, exit 2 blocks; https://developers.openai.com/codex/hooks).
#: Cursor's hooks reply allow/deny/ask, and "allow" skips the person's own approval of a command
#: (https://cursor.com/docs/agent/hooks): with no documented pass-through, none is installed there;
#: opencode's equivalent is a JavaScript plugin (``tool.execute.before``), not installed either. In
#: both, ``approve`` still refuses in the agent's shell (their CURSOR_AGENT / OPENCODE variables).
HOOK_FILES: dict[str, str] = {
    "claude-code": "~/.claude/settings.json",
    "codex": "~/.codex/hooks.json",
}
#: The tools each host's hook is asked about: Claude Code's shell and file tools, Codex's shell.
HOOK_MATCHERS = {"claude-code": "Bash|Write|Edit|MultiEdit|NotebookEdit", "codex": "Bash"}
#: What marks our entry in a hooks file: the script's name in its command.
HOOK_SCRIPT = "hostguard.py"


@dataclass(frozen=True)
class HookChange:
    """Outcome of :func:`install_hook` / :func:`remove_hook`: the settings file and what happened."""

    path: Path
    status: Literal["installed", "unchanged", "removed", "absent"]
    command: str


def hook_command(state: Path) -> str:
    """The command the host runs: this installation's Python, isolated (``-I``: no user site, no
    current folder on the path), on :mod:`skill.hostguard`, with the state folder to guard."""
    import shlex

    script = _PACKAGE_DIR / HOOK_SCRIPT
    return " ".join(shlex.quote(w) for w in (sys.executable, "-I", str(script), "--state", str(state)))


def _read_settings(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InstallError(f"Cannot read {path}: {exc.strerror or exc}; nothing was changed.") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); nothing was changed. Fix it, then run again.") from None
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise InstallError(f"{path} does not hold a settings object with a hooks table; nothing was changed.")
    return data


def _write_settings(path: Path, data: dict) -> None:
    from tools.platform.files import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, [(json.dumps(data, indent=2) + "\n").encode()])


def _our_hook(entry: object) -> bool:
    hooks = entry.get("hooks") if isinstance(entry, dict) else None
    return isinstance(hooks, list) and any(isinstance(h, dict) and HOOK_SCRIPT in str(h.get("command", ""))
                                           for h in hooks)


def install_hook(agent: str, state: Path, home: Path | None = None) -> HookChange:
    """Add the guard hook to ``agent``'s per-user hooks file (:data:`HOOK_FILES`), keeping every other
    setting and hook; an entry of ours already there is replaced (the state folder or Python moved).
    Raises InstallError for an agent without one, or a settings file that does not parse (left as it is)."""
    if agent not in HOOK_FILES:
        raise InstallError(f"{agent} has no hook model-factory can install (see `model-factory install-skill "
                           "--help`); its shells are still refused by `model-factory approve`.")
    path = _hook_path(agent, home)
    data = _read_settings(path)
    command = hook_command(state)
    entry = {"matcher": HOOK_MATCHERS[agent], "hooks": [{"type": "command", "command": command}]}
    hooks = data.setdefault("hooks", {})
    pre = [e for e in hooks.get("PreToolUse", []) if not _our_hook(e)]
    if entry in hooks.get("PreToolUse", []) and len(pre) == len(hooks["PreToolUse"]) - 1:
        return HookChange(path, "unchanged", command)
    hooks["PreToolUse"] = [*pre, entry]
    _write_settings(path, data)
    return HookChange(path, "installed", command)


def remove_hook(agent: str, home: Path | None = None) -> HookChange:
    """Remove our guard hook from ``agent``'s hooks file (every other setting and hook kept)."""
    path = _hook_path(agent, home)
    data = _read_settings(path)
    hooks = data.get("hooks", {})
    pre = hooks.get("PreToolUse", [])
    kept = [e for e in pre if not _our_hook(e)]
    if len(kept) == len(pre):
        return HookChange(path, "absent", "")
    if kept:
        hooks["PreToolUse"] = kept
    else:
        hooks.pop("PreToolUse")
    if not hooks:
        data.pop("hooks")
    _write_settings(path, data)
    return HookChange(path, "removed", "")


def _hook_path(agent: str, home: Path | None) -> Path:
    relative = HOOK_FILES[agent].removeprefix("~/")
    return (home or Path.home()) / relative


# -- MCP server entries ---------------------------------------------------------------------

#: Agents whose MCP entry ``mcp-config`` prints, and the file it belongs in.
MCP_AGENTS: dict[str, str] = {
    "claude-code": "a command to run with the claude CLI (it writes Claude Code's own configuration; for one "
                   "project, the same entry as JSON goes in .mcp.json)",
    "cursor": ".cursor/mcp.json in the project, or ~/.cursor/mcp.json",
    "codex": "~/.codex/config.toml (or .codex/config.toml of a trusted project)",
    "claude-desktop": "claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/; Windows: "
                      "%APPDATA%\\Claude\\)",
}
SERVER_NAME = "model-factory"


def server_command() -> list[str]:
    """The absolute command that starts this installation's MCP server: the ``model-factory`` a
    person's PATH finds (when it is this installation), else this installation's console script,
    else ``<python> -m skill``; then ``mcp``. MCP hosts do not read the shell's PATH, so it is
    always absolute."""
    from tools.core import PROGRAM, console_script, program

    if program() == PROGRAM:
        found = shutil.which(PROGRAM)
        if found:
            return [str(Path(found).absolute()), "mcp"]
    script = console_script()
    return [str(script), "mcp"] if script else [sys.executable, "-m", "skill", "mcp"]


def mcp_entry(agent: str) -> str:
    """``agent``'s MCP server entry for this installation, in that agent's own format.

    claude-code: a ``claude mcp add --scope user`` command; cursor: ``mcp.json``; codex: a
    ``[mcp_servers.model-factory]`` table of ``config.toml``; claude-desktop:
    ``claude_desktop_config.json`` (the state store is per user: the app's server and a person's
    ``approve`` find the same one from any folder)."""
    import shlex

    command, *args = server_command()
    if agent == "claude-code":
        return " ".join(["claude", "mcp", "add", "--scope", "user", SERVER_NAME, "--",
                         *(shlex.quote(w) for w in [command, *args])])
    if agent == "codex":
        import tomlkit

        table = tomlkit.table()
        table.add("command", command)
        table.add("args", args)
        doc = tomlkit.document()
        servers = tomlkit.table(is_super_table=True)
        servers.add(SERVER_NAME, table)
        doc.add("mcp_servers", servers)
        return tomlkit.dumps(doc).strip()
    entry: dict[str, object] = {"command": command, "args": args}
    return json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2)


def _say(text: str, stream: TextIO, end: str = "\n") -> None:
    """``text`` for a person on ``stream``: at a terminal wrapped to its width, a command in backticks whole on
    a line of its own (:func:`skill.terminal.wrap`); piped, one line as is."""
    lines = terminal.wrap(text, terminal.Terminal.of(stream).width, "  ", "", commands=True)
    print("\n".join(lines), end=end, file=stream, flush=True)


def main(dest: str | os.PathLike[str] | None = None, *, agent: str = "claude-code", project: bool = False,
         force: bool = False, hook: bool | None = None, remove: bool = False, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """Run ``install`` into ``dest`` (default: ``agent``'s skills folder) and say how to connect the tools.
    ``hook``: also install the guard hook (True), not (False), or ask at an interactive terminal (None);
    ``remove``: only remove the guard hook."""
    if remove:
        return _remove_hook(agent, out or sys.stdout, err or sys.stderr)
    from tools.core import shell_command
    from tools.guardrails.secret_detection import scan_for_secrets

    out, err = out or sys.stdout, err or sys.stderr
    if dest is not None and (hits := scan_for_secrets(str(dest), root="--dest")):  # the guard every argument has
        _say(f"Not installed: --dest holds a secret-looking value ({hits[0].kind}; not shown); nothing was written. "
              "Pass a folder path without a secret in it.", err)
        return EXIT_TOOL_ERROR
    folder = Path(dest) if dest is not None else skills_folder(agent, project)
    try:
        result = install(folder, force=force)
    except InstallError as exc:
        _say(f"Not installed: {exc}", err)
        return EXIT_TOOL_ERROR
    said = {"installed": "Installed", "replaced": "Upgraded", "unchanged": "Already up to date:"}[result.status]
    _say(f"{said} the {result.path.name} skill in {result.path} ({len(result.files)} files).", out)
    if agent in MCP_AGENTS:
        connect = shell_command(["mcp-config", "--agent", agent])
        _say(f"The skill calls model-factory's tools: connect them with the MCP entry `{connect}` prints, or let "
              f"the agent run the commands `{shell_command(['--help'])}` lists, with --json.", err)
    else:
        _say(f"The skill calls model-factory's tools: let the agent run the commands `{shell_command(['--help'])}` "
              "lists, with --json, or register `" + " ".join(server_command()) + "` as a local MCP server.", err)
    return _offer_hook(agent, hook, out, err)


def _offer_hook(agent: str, hook: bool | None, out: TextIO, err: TextIO) -> int:
    """Install the guard hook when asked, or ask a person at a terminal; else say how."""
    from tools.core import shell_command
    from tools.guardrails.store import state_folder

    if agent not in HOOK_FILES:
        if hook:
            _say(f"No guard hook for {agent}: {_NO_HOOK}", err)
        return EXIT_OK
    if hook is None:
        if not (sys.stdin.isatty() and err.isatty()):
            command = shell_command(["install-skill", "--agent", agent, "--hook"])
            _say(f"Also install the guard hook that stops {agent}'s own shell from approving plans or writing the "
                  f"state folder (in {HOOK_FILES[agent]}): `{command}`", err)
            return EXIT_OK
        _say(f"Install the guard hook in {HOOK_FILES[agent]}? It stops the agent's own shell from running "
              "`model-factory approve`, `prime train run|stop|delete|restart --yes` and commands on the state folder "
              "[y/N] ", err, end="")
        hook = sys.stdin.readline().strip().lower() in ("y", "yes")
    if not hook:
        return EXIT_OK
    try:
        change = install_hook(agent, state_folder(os.environ, None))
    except InstallError as exc:
        _say(f"Guard hook not installed: {exc}", err)
        return EXIT_TOOL_ERROR
    said = "Installed" if change.status == "installed" else "Already installed:"
    _say(f"{said} the guard hook (a PreToolUse entry) in {change.path}.", out)
    trust = " Codex runs it once you trust it in its /hooks screen." if agent == "codex" else ""
    _say(f"Remove it with `{shell_command(['install-skill', '--agent', agent, '--remove-hook'])}`, or delete the "
          f"PreToolUse entry naming {HOOK_SCRIPT} from that file.{trust}", err)
    return EXIT_OK


_NO_HOOK = ("its host has no hook model-factory installs (Cursor's would have to allow every other command; opencode's "
            "is a JavaScript plugin); `model-factory approve` still refuses in its shells.")


def _remove_hook(agent: str, out: TextIO, err: TextIO) -> int:
    if agent not in HOOK_FILES:
        _say(f"No guard hook for {agent}: {_NO_HOOK}", err)
        return EXIT_OK
    try:
        change = remove_hook(agent)
    except InstallError as exc:
        _say(f"Guard hook not removed: {exc}", err)
        return EXIT_TOOL_ERROR
    _say(f"Removed the guard hook from {change.path}." if change.status == "removed" else
          f"No guard hook of model-factory's in {change.path}; nothing was changed.", out)
    return EXIT_OK


def mcp_config_main(agent: str, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Print ``agent``'s MCP entry on stdout and where it goes on stderr."""
    out, err = out or sys.stdout, err or sys.stderr
    _say(f"MCP server entry for {agent}: {MCP_AGENTS[agent]}.", err)
    print(mcp_entry(agent), file=out)
    return EXIT_OK
