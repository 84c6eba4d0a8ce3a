"""Secrets by name, never by value.

Three jobs, all local and pure (no HTTP):

* **Forwarding.** A run may receive exactly two secrets, named in :data:`FORWARDABLE`
  (``WANDB_API_KEY`` -> create-body key ``wandbApiKey``, ``HF_TOKEN`` -> ``hfToken``;
  prime-api.md §3.2 step 5). Tools take the *names*; :func:`resolve_forwarded` reads the
  values in-process from env files and the agent's environment at dispatch.
* **Env files.** :func:`parse_env_file` follows ``prime_cli/utils/env_vars.py`` (0.18.0)
  rule for rule, except that no message ever contains a value.
* **Detection.** :func:`find_secret_values` walks tool arguments or a parsed TOML and names
  the *locations* of values that look like secrets, so a tool can refuse them; the key
  formats (:data:`KEY_FORMATS`, :data:`KEYED_HEX`) and secret-named environment variables
  (:func:`is_secret_env_name`) say what a secret looks like.

Hiding the values found here is :mod:`tools.guardrails.scrubbing`'s job (it uses this module,
never the reverse).
"""

from __future__ import annotations

import base64
import binascii
import collections
import math
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tools.errors import FieldProblem, ToolError, ToolFailure, fail

#: Env names a run may receive -> their key in the create body (POST /training/runs).
FORWARDABLE: dict[str, str] = {"WANDB_API_KEY": "wandbApiKey", "HF_TOKEN": "hfToken"}

#: The key that launches runs. It is never forwarded to a run.
LAUNCH_KEY = "PRIME_API_KEY"

#: Values shorter than this are neither scrubbed nor matched as "known" (too many false hits).
MIN_SECRET_LENGTH = 8

_NEVER_PASTE = "export it in the agent's environment or put it in an env file; never paste it"
_ALLOWED = " and ".join(sorted(FORWARDABLE))

# --------------------------------------------------------------------------------------
# Env files (prime_cli/utils/env_vars.py, 0.18.0)
# --------------------------------------------------------------------------------------

_ENV_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")  # the CLI's key rule
_REFERENCE = re.compile(r"\$\{([a-zA-Z_][a-zA-Z0-9_]*)\}")  # the CLI's ${VAR} rule


class EnvFileError(ValueError):
    """An env file could not be used. ``str(err)`` names the file (and line and variable
    when known) and never contains a value.

    Attributes: ``path``, ``line`` (1-based, or ``None``), ``name`` (the variable, or ``None``).
    """

    def __init__(self, message: str, path: Path, line: int | None = None, name: str | None = None) -> None:
        super().__init__(message)
        self.path, self.line, self.name = path, line, name


@dataclass(frozen=True)
class EnvFile:
    """A parsed env file: ``values`` (name -> value, later lines win), ``warnings`` (each line that
    did not become a plain ``NAME=value``: skipped, or kept with what looks like a comment; each
    naming file:line, never a value), ``lines`` (name -> the 1-based line its value came from) and
    ``commented`` (the names whose value goes on after a space with ``#``: prime keeps that text)."""

    path: Path
    values: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)
    commented: frozenset[str] = frozenset()


def parse_env_file(path: str | Path, env: Mapping[str, str]) -> EnvFile:
    """Parse ``path`` with the rules of ``prime``'s ``parse_env_file``.

    The convention is the prime CLI's own (``prime_cli/utils/env_vars.py`` ``parse_env_file``,
    prime 0.18.0), not python-dotenv's: the wheel does not use python-dotenv (its METADATA requires
    no dotenv package), so there are no inline comments and no ``export`` prefix. Per line, after
    stripping whitespace: empty lines and lines starting with ``#`` are skipped; a line without
    ``=`` is skipped with a warning; ``KEY=VALUE`` splits at the first ``=`` and strips both sides;
    a value wrapped in double quotes or in single quotes loses them; a key not matching
    ``[A-Za-z_][A-Za-z0-9_]*`` is skipped with a warning (``export NAME=value`` too: its key is
    ``export NAME``); in values that were not single-quoted every ``${VAR}`` is replaced by
    ``env[VAR]`` (an empty value counts as set). Later lines override earlier ones. A ``#`` after a
    space in an unquoted value stays part of the value, as ``prime train`` sends it.

    Differences from the CLI, all about disclosure and saying what each line became: expansion
    reads ``env`` (the agent's environment as the :class:`~tools.core.Context` sees it) instead
    of ``os.environ``; the invalid-key warning names file:line but not the key (the "key" of a
    mangled line may be a pasted secret); an ``export`` line is named as such, and a value that
    goes on after ``" #"`` is warned about (``commented``; :func:`resolve_forwarded` refuses to
    forward one); the file is read as UTF-8.

    Raises:
        EnvFileError: the file is missing or unreadable, or ``${VAR}`` names an unset
            variable (the message names file:line and ``VAR``).
    """
    p = Path(path)
    lines = _read_lines(p)
    values: dict[str, str] = {}
    warnings: list[str] = []
    where: dict[str, int] = {}
    commented: set[str] = set()
    for line_num, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            warnings.append(f"Skipping invalid line {line_num} in {p}: missing '=' separator")
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
        single_quoted = value.startswith("'") and value.endswith("'")
        if single_quoted or (value.startswith('"') and value.endswith('"')):
            value = value[1:-1]
        if not _ENV_NAME.match(key):
            exported = _EXPORTED.match(key)
            if exported:
                name = exported[1] if _SHOWN_NAME.fullmatch(exported[1]) else "the variable"
                warnings.append(f"Skipping line {line_num} in {p}: it starts with `export `, which prime's env files "
                                f"do not take (prime reads `export {name}` as the name, which is not valid): write "
                                f"{name}=... without `export`")
            else:
                warnings.append(
                    f"Skipping invalid key on line {line_num} in {p}: must start with "
                    "letter/underscore, contain only alphanumeric/underscore"
                )
            continue
        if not quoted and _INLINE_COMMENT.search(value):
            commented.add(key)
            warnings.append(f"Line {line_num} in {p}: the value of {key} goes on after a space with `#`; prime's env "
                            "files have no inline comments, so that text is part of the value (as prime train would "
                            "send it). Put the comment on a line of its own")
        else:
            commented.discard(key)
        if not single_quoted:
            value = _expand(value, env, p, line_num)
        values[key], where[key] = value, line_num
    return EnvFile(path=p, values=values, warnings=warnings, lines=where, commented=frozenset(commented))


#: ``export NAME`` as the key of an env-file line (prime skips it as an invalid key).
_EXPORTED = re.compile(r"\Aexport\s+([A-Za-z_][A-Za-z0-9_]*)\Z")
#: A name a warning may show: an environment variable's usual shape (a pasted key is not).
_SHOWN_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
#: An unquoted value with what a dotenv reader would take for a comment: whitespace, then ``#``.
_INLINE_COMMENT = re.compile(r"\s#")


#: An env file holds a few lines; a larger one is not read (bytes).
MAX_ENV_FILE_BYTES = 1024 * 1024


def _read_lines(p: Path) -> list[str]:
    if not p.is_file():
        if p.is_dir():
            raise EnvFileError(f"Env file {p} is a folder, not a file; it was not read", p)
        if p.exists():  # /dev/zero, a FIFO, a <(...) substitution: reading it could block or never end
            raise EnvFileError(f"Env file {p} is not a regular file (a pipe, device or socket); it was not read", p)
        raise EnvFileError(f"Env file not found: {p}", p)
    try:
        if p.stat().st_size > MAX_ENV_FILE_BYTES:
            raise EnvFileError(f"Env file {p} is larger than {MAX_ENV_FILE_BYTES:,} bytes; it was not read", p)
    except OSError as exc:
        raise EnvFileError(f"Env file {p} cannot be read: {exc.strerror}", p) from None
    try:
        with open(p, encoding="utf-8") as f:
            return f.readlines()
    except UnicodeDecodeError:
        raise EnvFileError(f"Env file {p} is not UTF-8 text", p) from None
    except OSError as exc:
        raise EnvFileError(f"Env file {p} cannot be read: {exc.strerror}", p) from None


def _expand(value: str, env: Mapping[str, str], p: Path, line_num: int) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        resolved = env.get(name)
        if resolved is None:
            raise EnvFileError(
                f"Environment variable '{name}' is not set (referenced in {p}:{line_num}).", p, line_num, name
            )
        return resolved

    return _REFERENCE.sub(replace, value)


def raw_env_values(p: Path) -> list[tuple[str, str]]:
    """Every ``KEY=VALUE`` of an env file, unexpanded and quote-stripped (for scrubbing).

    ``(key, value)`` pairs in file order, keys not checked, ``#`` lines skipped: the values of a
    file :func:`parse_env_file` refuses (an unset ``${VAR}``). Raises :class:`EnvFileError` as
    :func:`parse_env_file` does for a missing, oversized, non-UTF-8 or unreadable file."""
    out = []
    for line in _read_lines(p):
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            out.append((key.strip(), value))
    return out


def toml_env_files(config: Mapping[str, Any], config_path: str | Path) -> list[Path]:
    """The env files a config names, as ``prime train`` resolves them: top-level
    ``env_file`` (str or list, deprecated) then ``env_files`` (str or list), each joined to
    the config file's folder (absolute paths stay absolute, ``~`` is not expanded)."""
    folder = Path(config_path).parent
    out: list[Path] = []
    for key in ("env_file", "env_files"):
        val = config.get(key)
        if isinstance(val, list):
            out.extend(folder / str(p) for p in val)
        elif isinstance(val, str):
            out.append(folder / val)
    return out


#: Seconds each ``git`` call of :func:`env_file_git_warning` may take.
GIT_TIMEOUT_SECONDS = 5.0


def env_file_git_warning(path: str | Path) -> str | None:
    """A warning naming ``path`` when the env file is tracked by git, or lies inside a git work
    tree without being ignored (its secrets could be committed and pushed); ``None`` outside git,
    when ignored, or when ``git`` is missing or slow. Asks the local ``git`` (``rev-parse
    --is-inside-work-tree``, ``ls-files --error-unmatch``, ``check-ignore``) in the file's folder,
    each call bounded by :data:`GIT_TIMEOUT_SECONDS`; no network."""
    p = Path(path)

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(p.parent), *args], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT_SECONDS, check=False)

    try:
        if git("rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
            return None
        if git("ls-files", "--error-unmatch", "--", p.name).returncode == 0:
            return (f"Env file {p} is tracked by git: its secrets are in the repository's history once committed. "
                    f"Untrack it (`git rm --cached {p.name}` in its folder), add it to .gitignore, and rotate any key "
                    "that was committed.")
        if git("check-ignore", "-q", "--", p.name).returncode == 0:
            return None
    except (OSError, subprocess.SubprocessError):
        return None
    return (f"Env file {p} is inside a git work tree and not ignored: a `git add .` would commit its secrets. "
            "Add it to .gitignore.")


# --------------------------------------------------------------------------------------
# Forwarding
# --------------------------------------------------------------------------------------


def resolve_forwarded(
    names: Iterable[str],
    env: Mapping[str, str],
    env_files: Iterable[str | Path] = (),
    on_warning: Callable[[str], None] | None = None,
) -> dict[str, str]:
    """Read the values of the secrets to forward to a run, by name.

    ``names``: env names chosen by the caller (only ``WANDB_API_KEY``, ``HF_TOKEN``);
    duplicates are ignored; only these names are forwarded, other keys in the files are not.
    ``env``: the agent's environment. ``env_files``: in override order, i.e. the config's
    :func:`toml_env_files` first, then files given to the tool. ``on_warning`` receives each
    env-file warning (skipped lines; no values), as the CLI prints them.

    Precedence (later wins): the agent's environment, then each env file in order. This is
    ``prime train``'s order for files (TOML ``env_file``, ``env_files``, ``--env-file``) with
    the environment as the lowest layer: a file named for this run is more specific than
    whatever the shell happens to export (the CLI only reads the environment for ``-e NAME``).

    Returns ``{name: value}``; map to body keys with :func:`wire_secrets`.

    Raises :class:`~tools.errors.ToolFailure` (no message contains a value):
        ``secret_in_input``: an argument holds ``KEY=VALUE`` or is itself a value;
        ``unsupported_secret``: ``PRIME_API_KEY`` (never forwarded) or a name other than
        the two (the message names both allowed names);
        ``secret_not_set``: a name is unset or empty in every source, or its value in the
        environment holds whitespace or a control character (no key does);
        ``env_file_invalid``: an env file is missing or references an unset ``${VAR}``, or the value
        it gives a forwarded name holds whitespace (an inline ``# note``: prime keeps it in the value).
    """
    wanted: list[str] = []
    for i, raw in enumerate(names):
        name = raw.strip() if isinstance(raw, str) else ""
        if "=" in name:
            key = name.partition("=")[0].strip()
            shown = f"'{key}=…'" if key in FORWARDABLE or key == LAUNCH_KEY else f"argument {i + 1}"
            raise fail(
                "secret_in_input",
                f"{shown} passes a secret value in a tool argument; pass only the variable name.",
                f"Pass the name (e.g. HF_TOKEN) and {_NEVER_PASTE}.",
            )
        if name == LAUNCH_KEY:
            raise fail(
                "unsupported_secret",
                f"{LAUNCH_KEY} is the key that launches runs; it is never forwarded to a run. "
                f"Only {_ALLOWED} can be forwarded.",
                f"Remove {LAUNCH_KEY} from the secrets to forward.",
            )
        if name not in FORWARDABLE:
            if not name:
                raise fail(
                    "unsupported_secret",
                    f"Argument {i + 1} of the secrets to forward is empty; only {_ALLOWED} can be forwarded.",
                    f"Pass {_ALLOWED} by name, or nothing.",
                )
            if _looks_like_value(name, env):
                raise fail(
                    "secret_in_input",
                    f"Argument {i + 1} of the secrets to forward is not a variable name; it looks like "
                    "a value (not shown).",
                    f"Pass only the names {_ALLOWED}, and {_NEVER_PASTE}.",
                )
            if name.upper() in FORWARDABLE:
                got = f"argument {i + 1} (names are case-sensitive: use {name.upper()})"
            else:
                got = name if re.fullmatch(r"[A-Z_][A-Z0-9_]{0,63}", name) else f"argument {i + 1}"
            raise fail(
                "unsupported_secret",
                f"Only {_ALLOWED} can be forwarded to a run; got {got}.",
                f"Forward only {_ALLOWED}; other secrets cannot reach a hosted run today.",
            )
        if name not in wanted:
            wanted.append(name)

    merged: dict[str, str] = {n: env[n] for n in wanted if env.get(n)}
    origin: dict[str, tuple[EnvFile, int] | None] = dict.fromkeys(merged)
    for path in env_files:
        try:
            parsed = parse_env_file(path, env)
        except EnvFileError as exc:
            raise fail("env_file_invalid", str(exc), "Fix or remove the env file, then plan again.") from None
        for warning in parsed.warnings:
            if on_warning is not None:
                on_warning(warning)
        for n, v in parsed.values.items():
            if n in wanted and v:
                merged[n], origin[n] = v, (parsed, parsed.lines[n])
    for n, value in merged.items():
        if not _unusable(value):
            continue
        source = origin.get(n)
        where = f"line {source[1]} of {source[0].path}" if source else "the agent's environment"
        why = ("goes on after a space with `#` (prime's env files have no inline comments: the text is part of the "
               "value)" if source and n in source[0].commented else "contains whitespace or control characters")
        raise fail("env_file_invalid" if source else "secret_not_set",
                   f"The value of {n} from {where} {why}: a key never does, so the run would get a broken {n}. "
                   "Nothing was sent.",
                   "Put the comment on a line of its own (or remove the spaces) so the line is NAME=value, then plan "
                   "again." if source else f"Ask the user to export {n} again without spaces or newlines; then plan "
                   "again.")
    missing = [n for n in wanted if n not in merged]
    if missing:
        raise fail(
            "secret_not_set",
            f"Not set (or empty) in the agent's environment or the env files given: {', '.join(missing)}.",
            f"Ask the user to {_NEVER_PASTE}; then plan again.",
        )
    return merged


def _unusable(value: str) -> bool:
    """A secret value no key has: whitespace or a control character in it (after the file's or the
    shell's own stripping)."""
    return any(ch.isspace() or not ch.isprintable() for ch in value)


def _looks_like_value(arg: str, env: Mapping[str, str]) -> bool:
    """An argument that is probably a pasted secret rather than an env name."""
    return bool(
        _format_of(arg)
        or _WANDB_KEY.fullmatch(arg)
        or not _ENV_NAME.match(arg)
        or (len(arg) >= MIN_SECRET_LENGTH and arg in env.values())
    )


def wire_secrets(values: Mapping[str, str]) -> dict[str, str]:
    """``{"HF_TOKEN": v}`` -> ``{"hfToken": v}`` for the create body (forwardable names only)."""
    return {FORWARDABLE[n]: v for n, v in values.items() if n in FORWARDABLE}


# --------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------

_B = r"(?<![A-Za-z0-9])"  # not in the middle of a longer word
#: The known key formats: (kind, pattern) pairs, a kind being what a finding or a redaction calls it.
KEY_FORMATS: list[tuple[str, re.Pattern[str]]] = [
    # W&B keys since 2025: "wandb_v1_" + 77 letters, digits and "_" (86 characters in all).
    ("Weights & Biases API key", re.compile(_B + r"wandb_v1_[A-Za-z0-9_]{20,}")),
    ("Tailscale key", re.compile(_B + r"tskey-[A-Za-z0-9-]{16,}")),
    ("Hugging Face token", re.compile(_B + r"hf_[A-Za-z0-9]{30,}")),
    ("Anthropic API key", re.compile(_B + r"sk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI-style API key", re.compile(_B + r"sk-[A-Za-z0-9_-]{20,}")),
    ("GitHub token", re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("AWS access key id", re.compile(_B + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])")),
    ("Slack token", re.compile(_B + r"xox[bpoas]-[A-Za-z0-9-]{10,}")),
    ("Prime Intellect token", re.compile(_B + r"pit_[A-Za-z0-9_-]{16,}")),
    ("JSON Web Token", re.compile(_B + r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}")),
    ("PEM private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
]
_WANDB_KEY = re.compile(r"(?<![0-9a-f])(?:local-)?[0-9a-f]{40}(?![0-9a-f])")
_WANDB_FIELD = re.compile(r"wandb|weights.?and.?biases", re.I)
_SECRET_KEY_NAME = re.compile(
    r"^(?:.*[_-])?(?:api[_-]?key|access[_-]?key|auth[_-]?key|secret(?:[_-]?key)?|client[_-]?secret|password"
    r"|passwd|private[_-]?key|credentials?)$"
    r"|^(?:(?:hf|wandb|auth|access|api|bearer|github|gh|refresh|session|id)[_-])?token$",
    re.I,
)
_SECRETISH_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_PAT$")
_NOT_SECRET_ENV = re.compile(r"_(?:PATH|FILE|DIR)$")
_ENV_NAME_VALUE = re.compile(r"^[A-Z][A-Z0-9_]*$|^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
#: A 40-hex value right after words that introduce a key ("api key", "WANDB_API_KEY=", "token:"):
#: a W&B key in a log line. A bare 40-hex value is left alone (git commit shas look the same).
KEYED_HEX = re.compile(r"(?i)(?:api[_ -]?key|access[_ -]?key|secret|token|password)[\"' :=]{1,4}"
                       r"(?:local-)?([0-9a-f]{40})(?![0-9a-f])")


#: A variable whose name ends in a secret word (``AWS_SECRET_ACCESS_KEY``, ``HF_TOKEN``, ``api_key``,
#: ``password``), then ``=`` or ``:`` (quotes allowed, as in JSON), then its value: ``group(1)`` the name,
#: ``group(2)`` the value. ``MAX_TOKENS``, ``tokenizer`` and ``AWS_ACCESS_KEY_ID`` do not end in one.
_ASSIGNED = re.compile(
    r"(?<![A-Za-z0-9_-])((?:[A-Za-z0-9]+[_-])*(?:api[_-]?key|access[_-]?key|secret(?:[_-]?key)?"
    r"|token|password|passwd|credentials?|private[_-]?key|pat|key))[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"([^\s\"',;&}\]\[)(<>]+)", re.I)
_SECRET_WORD = re.compile(r"key|token|secret|passw|credential|pat", re.I)
#: Values of a secret-named variable that are not secrets: a name or reference, a placeholder, a mask.
_NOT_A_VALUE = re.compile(
    r"\A(?:(?-i:[A-Z][A-Z0-9_]*)|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|none|null|true|false|x+|\*+|redacted)\Z", re.I)


def assigned_secrets(text: str) -> list[tuple[str, int, int]]:
    """``(name, start, end)`` of each value assigned to a secret-named variable in ``text``
    (``AWS_SECRET_ACCESS_KEY=...``, ``"api_key": "..."``, ``?token=...``): values of at least
    :data:`MIN_SECRET_LENGTH` characters that are not a variable name, ``${VAR}``, ``None`` or a mask."""
    out: list[tuple[str, int, int]] = []
    if not _SECRET_WORD.search(text):  # the common case, cheaply
        return out
    for match in _ASSIGNED.finditer(text):
        value = match.group(2)
        if len(value) >= MIN_SECRET_LENGTH and not _NOT_A_VALUE.match(value) and not value.startswith("[REDACTED"):
            out.append((match.group(1), match.start(2), match.end(2)))
    return out


#: A run of base64 characters long enough to be a key without a known prefix (an AWS secret access key is 40;
#: generic API tokens are 32 or more), and longer than the CamelCase words of a run name.
_TOKEN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{32,}={0,2}(?![A-Za-z0-9+/=])")
#: A word inside a token: a lowercase run of 3+ letters, capitalised or not (CamelCase names are made of them).
_WORDLIKE = re.compile(r"[A-Z]?[a-z]{3,}")
#: Less than this share of a credential-shaped token is word-like (random base64 keys: ~0.2; CamelCase names: 0.6+).
MAX_WORDLIKE_SHARE = 0.5
#: At least this Shannon entropy (bits per character) in a credential-shaped token.
MIN_TOKEN_ENTROPY = 3.5


def credential_tokens(text: str) -> list[str]:
    """The tokens of ``text`` shaped like a credential without a known prefix (the secret half of
    an AWS key pair, a random API token): 32+ characters of the base64 alphabet with upper- and
    lower-case letters, less than :data:`MAX_WORDLIKE_SHARE` of them in word-like runs, and at least
    :data:`MIN_TOKEN_ENTROPY` bits per character. A heuristic, for free text that crosses the wire
    (run names) and for arguments an error would quote: ids (lowercase), hex shas, paths and names
    made of words pass; about 99% of random 32- to 40-character keys are caught."""
    found = []
    for token in _TOKEN.findall(text):
        body = token.rstrip("=")
        if not (re.search("[A-Z]", body) and re.search("[a-z]", body)):
            continue
        words = sum(len(w) for w in _WORDLIKE.findall(body))
        counts = collections.Counter(body)
        entropy = -sum(n / len(body) * math.log2(n / len(body)) for n in counts.values())
        if words / len(body) < MAX_WORDLIKE_SHARE and entropy >= MIN_TOKEN_ENTROPY:
            found.append(token)
    return found


#: Characters of a string checked for an encoded secret, at most (longer strings: their head).
_DECODE_CHARS = 4096
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){16,}(?![0-9A-Fa-f])")


def _decoded(text: str) -> Iterator[str]:
    """The text that base64 or hex runs of ``text`` decode to, when it is printable (an encoded key)."""
    head = text[:_DECODE_CHARS]
    candidates: list[bytes] = []
    for run in _BASE64.findall(head):
        body = run.rstrip("=")
        for alphabet in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                candidates.append(alphabet(body + "=" * (-len(body) % 4)))
            except (binascii.Error, ValueError):
                continue
    for run in _HEX.findall(head):
        candidates.append(bytes.fromhex(run))
    for raw in candidates:
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if decoded.isprintable():
            yield decoded


def _hidden_format(text: str) -> str | None:
    """The key format found in ``text`` once lines are joined (a key split by a newline) or runs
    are decoded (base64, hex), in words; ``None`` when neither shows one."""
    if "\n" in text or "\r" in text:
        joined = re.sub(r"\\?[ \t]*\r?\n[ \t]*", "", text)
        if kind := _format_of(joined):
            return f"{kind} split across lines"
    for decoded in _decoded(text):
        if kind := _format_of(decoded):
            return f"{kind}, encoded"
    return None


@dataclass(frozen=True)
class SecretHit:
    """One secret-looking value: where it is (``location``, dotted) and why it was flagged
    (``kind``: a format name, "a known secret value", or "a literal under a secret-named
    key"). Never holds the value."""

    location: str
    kind: str


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret: it contains KEY, TOKEN,
    SECRET, PASSWORD, PASSWD or CREDENTIAL or ends in ``_PAT`` (any case), and does not end in
    ``_PATH``/``_FILE``/``_DIR`` (which hold paths)."""
    upper = name.upper()
    return bool(_SECRETISH_ENV.search(upper) and not _NOT_SECRET_ENV.search(upper))


def _format_of(text: str) -> str | None:
    for kind, pattern in KEY_FORMATS:
        if pattern.search(text):
            return kind
    return None


def _child(path: str, key: Any, index: int, secret_key: bool) -> str:
    """The location of ``path[key]``; a key that looks secret is shown by position only."""
    if not isinstance(key, str) or secret_key or len(key) > 64:
        return f"{path}.<key #{index + 1}>"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def _scan(obj: Any, root: str, known_values: Iterable[str], check_key_names: bool) -> list[tuple[str, str, str]]:
    """``(location, kind, flagged text)`` for every secret-looking string or key in ``obj``."""
    known = [v for v in set(known_values) if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH]
    hits: dict[str, tuple[str, str]] = {}

    def check_str(text: str, path: str, key: str | None) -> None:
        kind = _format_of(text)
        if kind is None and any(v in text for v in known):
            kind = "a known secret value"
        if kind is None and assigned_secrets(text):
            kind = "a value assigned to a secret-named variable"
        if kind is None and len(text) >= 24:
            kind = _hidden_format(text)
        if kind is None and _WANDB_KEY.search(text) and _WANDB_FIELD.search(path):
            kind = "Weights & Biases API key"
        if (
            kind is None
            and check_key_names
            and key is not None
            and _SECRET_KEY_NAME.match(key)
            and len(text.strip()) >= MIN_SECRET_LENGTH
            and not _ENV_NAME_VALUE.match(text.strip())
        ):
            kind = "a literal under a secret-named key"
        if kind is not None:
            hits.setdefault(path, (kind, text))

    def walk(value: Any, path: str, key: str | None) -> None:
        if isinstance(value, BaseModel):
            value = value.model_dump()
        if isinstance(value, str):
            check_str(value, path, key)
        elif isinstance(value, Mapping):
            for i, (k, v) in enumerate(value.items()):
                secret_key = isinstance(k, str) and bool(_format_of(k) or any(s in k for s in known))
                if secret_key:
                    hits.setdefault(f"{path}.<key #{i + 1}>", ("a secret-looking key", k))
                walk(v, _child(path, k, i, secret_key), k if isinstance(k, str) else None)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]", key)

    walk(obj, root, None)
    return [(location, kind, text) for location, (kind, text) in hits.items()]


def scan_for_secrets(
    obj: Any, *, root: str, known_values: Iterable[str] = (), check_key_names: bool = False
) -> list[SecretHit]:
    """Like :func:`find_secret_values`, with the reason for each location."""
    return [SecretHit(location=loc, kind=kind) for loc, kind, _ in _scan(obj, root, known_values, check_key_names)]


def secret_texts(obj: Any, *, known_values: Iterable[str] = (), check_key_names: bool = False) -> list[str]:
    """The text flagged at each location :func:`scan_for_secrets` reports in ``obj`` (the string,
    or the key of a secret-looking key), in the same order: what a scrubber must hide. These are
    the secret values themselves: never output them."""
    return [text for _, _, text in _scan(obj, "", known_values, check_key_names)]


def find_secret_values(
    obj: Any, *, root: str, known_values: Iterable[str] = (), check_key_names: bool = False
) -> list[str]:
    """Dotted locations (``root.a.b[2].c``) of values in ``obj`` that look like secrets.

    ``obj``: str / dict / list / pydantic model, nested (tool arguments, a parsed TOML).
    A string is flagged when it contains a known key format (W&B ``wandb_v1_``, Tailscale
    ``tskey-``, Hugging Face ``hf_``, OpenAI ``sk-``/``sk-proj-``, Anthropic ``sk-ant-``, GitHub
    ``ghp_``/``github_pat_``, AWS ``AKIA``, Slack ``xox?-``, Prime ``pit_``, a JWT, a PEM private
    key), under any key or table, a 40-hex legacy W&B key in a field whose
    path mentions wandb (elsewhere 40 hex is usually a git sha), or any of
    ``known_values`` (those of at least :data:`MIN_SECRET_LENGTH` characters; pass
    ``Scrubber.known_values()``). With ``check_key_names`` (use it for TOML files) a literal
    of 8+ characters under a key named like ``api_key``/``auth_key``/``token``/``password``/``secret``
    (a 40-hex legacy W&B key there, too) is flagged too, unless it is an env var name (``OPENAI_API_KEY``, ``EMPTY``) or
    ``${VAR}``. Keys that look like secrets are reported as ``path.<key #n>``.

    Returns locations only, never values; ``[]`` when clean.
    """
    return [hit.location for hit in scan_for_secrets(obj, root=root, known_values=known_values,
                                                     check_key_names=check_key_names)]


def refuse_secret_values(
    obj: Any, *, root: str, known_values: Iterable[str] = (), check_key_names: bool = False
) -> None:
    """Raise ``ToolFailure(secret_in_input)`` listing each location (never a value) when
    :func:`scan_for_secrets` finds anything; return ``None`` otherwise."""
    hits = scan_for_secrets(obj, root=root, known_values=known_values, check_key_names=check_key_names)
    if hits:
        raise ToolFailure(
            ToolError(
                code="secret_in_input",
                message="A secret value was found in the input at "
                + ", ".join(h.location for h in hits)
                + " (values not shown).",
                fix=(
                    "Remove the value. Secrets travel by name: forward WANDB_API_KEY / HF_TOKEN by "
                    f"name and ask the user to {_NEVER_PASTE}."
                ),
                fields=[FieldProblem(path=h.location, problem=f"looks like {h.kind}") for h in hits],
            )
        )
