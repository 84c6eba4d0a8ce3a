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

import re
import subprocess
from collections.abc import Callable, Iterable, Mapping
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
    """A parsed env file: ``values`` (name -> value, later lines win) and ``warnings``
    (skipped lines, each naming file:line, never a value)."""

    path: Path
    values: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def parse_env_file(path: str | Path, env: Mapping[str, str]) -> EnvFile:
    """Parse ``path`` with the rules of ``prime``'s ``parse_env_file``.

    Per line, after stripping whitespace: empty lines and lines starting with ``#`` are
    skipped; a line without ``=`` is skipped with a warning; ``KEY=VALUE`` splits at the
    first ``=`` and strips both sides; a value wrapped in double quotes or in single quotes
    loses them; a key not matching ``[A-Za-z_][A-Za-z0-9_]*`` is skipped with a warning;
    in values that were not single-quoted every ``${VAR}`` is replaced by ``env[VAR]`` (an
    empty value counts as set). Later lines override earlier ones.

    Differences from the CLI, all about disclosure: expansion reads ``env`` (the agent's
    environment as the :class:`~tools.core.Context` sees it) instead of ``os.environ``;
    the invalid-key warning names file:line but not the key (the "key" of a mangled line
    may be a pasted secret); the file is read as UTF-8.

    Raises:
        EnvFileError: the file is missing or unreadable, or ``${VAR}`` names an unset
            variable (the message names file:line and ``VAR``).
    """
    p = Path(path)
    lines = _read_lines(p)
    values: dict[str, str] = {}
    warnings: list[str] = []
    for line_num, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            warnings.append(f"Skipping invalid line {line_num} in {p}: missing '=' separator")
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        single_quoted = value.startswith("'") and value.endswith("'")
        if single_quoted or (value.startswith('"') and value.endswith('"')):
            value = value[1:-1]
        if not _ENV_NAME.match(key):
            warnings.append(
                f"Skipping invalid key on line {line_num} in {p}: must start with "
                "letter/underscore, contain only alphanumeric/underscore"
            )
            continue
        if not single_quoted:
            value = _expand(value, env, p, line_num)
        values[key] = value
    return EnvFile(path=p, values=values, warnings=warnings)


#: An env file holds a few lines; a larger one is not read (bytes).
MAX_ENV_FILE_BYTES = 1024 * 1024


def _read_lines(p: Path) -> list[str]:
    if not p.is_file():
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
        ``secret_not_set``: a name is unset or empty in every source;
        ``env_file_invalid``: an env file is missing or references an unset ``${VAR}``.
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
    for path in env_files:
        try:
            parsed = parse_env_file(path, env)
        except EnvFileError as exc:
            raise fail("env_file_invalid", str(exc), "Fix or remove the env file, then plan again.") from None
        for warning in parsed.warnings:
            if on_warning is not None:
                on_warning(warning)
        merged.update({n: v for n, v in parsed.values.items() if n in wanted and v})
    missing = [n for n in wanted if n not in merged]
    if missing:
        raise fail(
            "secret_not_set",
            f"Not set (or empty) in the agent's environment or the env files given: {', '.join(missing)}.",
            f"Ask the user to {_NEVER_PASTE}; then plan again.",
        )
    return merged


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
