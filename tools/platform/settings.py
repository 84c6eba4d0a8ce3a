"""Credentials and URLs, resolved exactly as ``prime`` 0.18.0 resolves them (read-only).

Source: reference/prime-api.md §1.1-1.2 and ``prime_cli/core/config.py`` of prime 0.18.0.

Precedence, per setting (environment > active context / config file > default):

| setting | environment | file / context | default |
|---|---|---|---|
| API key | ``PRIME_API_KEY`` (any non-empty value) | ``api_key`` | none |
| team | ``PRIME_TEAM_ID`` (only if non-blank after strip) | ``team_id`` | none (personal account) |
| user | ``PRIME_USER_ID`` (any value, even "") | ``user_id`` | none |
| API base URL | ``PRIME_API_BASE_URL``, then ``PRIME_BASE_URL`` | ``base_url`` | ``https://api.primeintellect.ai`` |
| traces URL | ``PRIME_TRACES_URL`` | ``traces_url`` | ``https://api.primeintellect.ai`` (never ``base_url``) |
| frontend URL | ``PRIME_FRONTEND_URL`` | ``frontend_url`` | ``https://app.primeintellect.ai`` |
| context | ``PRIME_CONTEXT`` (or the ``context`` argument, which wins) | ``~/.prime/environments/<name>.json`` | - |

Base and traces URLs lose a trailing ``/`` and a trailing ``/api/v1``.

Differences from the CLI, on purpose:

- Nothing is ever written. The CLI creates ``~/.prime/`` and a default ``config.json``
  when they are missing; we only read.
- A malformed ``config.json`` (bad JSON, not an object, wrong value types) is reported in
  :attr:`Settings.config_error` and treated as empty; the CLI crashes on it.
- A bad or unknown context is reported in :attr:`Settings.context_error` and not applied
  (the CLI ignores an unknown ``PRIME_CONTEXT`` silently, and exits 1 for ``--context``).
  Callers that launch anything should refuse while ``context_error`` is set.
- ``PRIME_TEAM_ID`` is used stripped of surrounding blanks (the CLI sends it unstripped).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

DEFAULT_BASE_URL = "https://api.primeintellect.ai"
DEFAULT_FRONTEND_URL = "https://app.primeintellect.ai"
DEFAULT_TRACES_URL = "https://api.primeintellect.ai"
PRODUCTION_CONTEXT = "production"

#: Team ids are CUID v1 (checked by ``prime config set-team-id``), reference §1.2.
TEAM_ID_PATTERN = re.compile(r"^c[a-z0-9]{24}$")
_CONTEXT_NAME = re.compile(r"^[A-Za-z0-9_-]+$")

# Value types of ``ConfigModel`` in prime_cli/core/config.py (only the keys we use).
_STR_KEYS = ("api_key", "base_url", "frontend_url", "current_environment")
_OPTIONAL_STR_KEYS = ("team_id", "team_name", "team_role", "user_id", "user_name", "traces_url")

Source = Literal["env", "context", "config", "none"]
UrlSource = Literal["env", "context", "config", "default"]


def strip_api_v1(url: str) -> str:
    """``url`` without a trailing ``/`` and a trailing ``/api/v1`` (as ``Config._strip_api_v1``)."""
    return url.rstrip("/").removesuffix("/api/v1")


def looks_like_team_id(value: str | None) -> bool:
    """True when ``value`` has the CUID v1 form the CLI requires of team ids (``^c[a-z0-9]{24}$``)."""
    return bool(value) and TEAM_ID_PATTERN.match(value or "") is not None


class Settings(BaseModel):
    """Resolved credentials, owner and URLs. Immutable; the key never appears in repr or dumps.

    Attributes (all strings are as resolved, URLs without ``/api/v1``):
        api_key: the API key (``SecretStr``; ``get_secret_value()`` to use it). Empty = none.
        api_key_source: where the key came from: ``env`` | ``context`` | ``config`` | ``none``.
        team_id: the team requests act for by default, or ``None`` for the personal account.
        team_id_source: ``env`` | ``context`` | ``config`` | ``none``.
        saved_team_id: the team the context / config file names, even when ``PRIME_TEAM_ID``
            overrides it (so a plan can show "env team X overrides saved team Y").
        team_name: the saved team's name, only when it describes :attr:`team_id`.
        user_id: ``PRIME_USER_ID`` or the saved user id (only used for the ``mine`` filter).
        base_url, base_url_source: platform API root (``{base_url}/api/v1/...``) and its origin.
        traces_url, traces_url_source: traces host root and its origin.
        frontend_url: dashboard root (links like ``{frontend_url}/dashboard/training/{run_id}``).
        context_name: the context loaded in memory (``PRIME_CONTEXT`` or the ``context``
            argument), ``None`` when none was requested or it could not be loaded.
        current_environment: the context the config file says is persistently active
            (``prime config use``); informational, its values are already in the file.
        config_path: ``<home>/.prime/config.json`` (may not exist).
        config_error: why the config file was ignored, when it was (malformed JSON, ...).
        context_error: why the requested context was not applied, when it was not.
    """

    model_config = ConfigDict(frozen=True)

    api_key: SecretStr = Field(default=SecretStr(""), repr=False)
    api_key_source: Source = "none"
    team_id: str | None = None
    team_id_source: Source = "none"
    saved_team_id: str | None = None
    team_name: str | None = None
    user_id: str | None = None
    base_url: str = DEFAULT_BASE_URL
    base_url_source: UrlSource = "default"
    traces_url: str = DEFAULT_TRACES_URL
    traces_url_source: UrlSource = "default"
    frontend_url: str = DEFAULT_FRONTEND_URL
    context_name: str | None = None
    current_environment: str = PRODUCTION_CONTEXT
    config_path: Path | None = None
    config_error: str | None = None
    context_error: str | None = None

    @property
    def has_api_key(self) -> bool:
        """True when an API key was resolved (it may still be unusable: :attr:`api_key_problem`)."""
        return bool(self.api_key.get_secret_value())

    @property
    def api_key_problem(self) -> str | None:
        """Why the resolved key cannot be sent (``None``: it can, or there is none): a key is one
        token of printable ASCII, so whitespace anywhere (a blank value, a trailing newline from
        ``$(cat key.txt)``), a control character or a non-ASCII character means a pasting accident.
        Never shows the value."""
        key = self.api_key.get_secret_value()
        if not key:
            return None
        if not key.strip():
            return f"the API key from {self.api_key_source} is blank (only whitespace)"
        if any(ch.isspace() or not ch.isprintable() or not ch.isascii() for ch in key):
            return (f"the API key from {self.api_key_source} contains whitespace or control characters (value not "
                    "shown; a trailing newline is the usual cause)")
        return None


def _read_json_object(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``(object, None)``, ``(None, None)`` when missing, or ``(None, error text)``. Never writes."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read {path}: {exc.__class__.__name__}: {exc}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON in {path}: {exc}"
    if not isinstance(data, dict):
        return None, f"invalid configuration in {path}: expected a JSON object, got {type(data).__name__}"
    return data, None


def _check_types(data: dict[str, Any], path: Path) -> str | None:
    """The CLI validates the file with pydantic ``ConfigModel``; report what it would reject."""
    for key in _STR_KEYS:
        if key in data and not isinstance(data[key], str):
            return f"invalid configuration in {path}: {key} must be a string"
    for key in _OPTIONAL_STR_KEYS:
        if key in data and data[key] is not None and not isinstance(data[key], str):
            return f"invalid configuration in {path}: {key} must be a string or null"
    return None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def home_folder(env: Mapping[str, str], home: Path | None = None) -> Path:
    """The home folder the prime CLI reads: ``home`` if given, else ``env["HOME"]``, else ``Path.home()``."""
    if home is not None:
        return Path(home)
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def resolve_settings(
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    context: str | None = None,
) -> Settings:
    """Resolve :class:`Settings` with ``prime`` 0.18.0's precedence, without writing anything.

    Args:
        env: environment to read (default ``os.environ``).
        home: folder holding ``.prime/`` (default ``env["HOME"]``, else ``Path.home()``).
        context: a context name to load in memory, like ``prime --context NAME``; it wins
            over ``PRIME_CONTEXT``. ``"production"`` (any case) resets the URLs to their
            defaults and the team to the personal account.

    Returns:
        The settings. Never raises for bad files: see ``config_error`` / ``context_error``.
    """
    env = os.environ if env is None else env
    prime_dir = home_folder(env, home) / ".prime"
    config_path = prime_dir / "config.json"

    data, config_error = _read_json_object(config_path)
    if data is not None:
        config_error = _check_types(data, config_path)
        if config_error:
            data = None
    file_cfg: dict[str, Any] = data or {}

    # The merged "file" view: config.json, then the context on top (in memory only).
    cfg: dict[str, Any] = {
        "api_key": file_cfg.get("api_key", ""),
        "team_id": file_cfg.get("team_id"),
        "team_name": file_cfg.get("team_name"),
        "user_id": file_cfg.get("user_id"),
        "base_url": file_cfg.get("base_url", DEFAULT_BASE_URL),
        "frontend_url": file_cfg.get("frontend_url", DEFAULT_FRONTEND_URL),
        "traces_url": file_cfg.get("traces_url"),
    }
    api_key_origin: Source = "config"
    team_origin: Source = "config"
    base_origin: UrlSource = "config" if "base_url" in file_cfg else "default"
    traces_origin: UrlSource = "config"
    current_environment = file_cfg.get("current_environment") or PRODUCTION_CONTEXT

    requested = context if context else (env.get("PRIME_CONTEXT") or None)
    context_name: str | None = None
    context_error: str | None = None
    if requested:
        if requested.lower() == PRODUCTION_CONTEXT:
            cfg.update(
                base_url=DEFAULT_BASE_URL,
                frontend_url=DEFAULT_FRONTEND_URL,
                traces_url=None,
                team_id=None,
                team_name=None,
            )
            base_origin = "default"
            context_name = requested
        elif not _CONTEXT_NAME.match(requested):
            context_error = (
                f"invalid context name {requested!r}: only letters, digits, '-' and '_' are allowed"
            )
        else:
            ctx_path = prime_dir / "environments" / f"{requested}.json"
            ctx, err = _read_json_object(ctx_path)
            if err:
                context_error = err
            elif ctx is None:
                context_error = f"unknown context {requested!r}: {ctx_path} does not exist"
            else:
                context_name = requested
                if "api_key" in ctx:
                    cfg["api_key"] = _str_or_none(ctx["api_key"]) or ""
                    api_key_origin = "context"
                cfg["team_id"] = _str_or_none(ctx.get("team_id"))
                cfg["team_name"] = _str_or_none(ctx.get("team_name"))
                cfg["user_id"] = _str_or_none(ctx.get("user_id"))
                cfg["base_url"] = _str_or_none(ctx.get("base_url")) or DEFAULT_BASE_URL
                cfg["frontend_url"] = _str_or_none(ctx.get("frontend_url")) or DEFAULT_FRONTEND_URL
                cfg["traces_url"] = _str_or_none(ctx.get("traces_url"))
                team_origin = "context"
                base_origin = "context"
                traces_origin = "context"

    # API key: any non-empty PRIME_API_KEY wins.
    env_key = env.get("PRIME_API_KEY") or ""
    if env_key:
        api_key, api_key_source = env_key, "env"
    elif cfg["api_key"]:
        api_key, api_key_source = cfg["api_key"], api_key_origin
    else:
        api_key, api_key_source = "", "none"

    # Team: PRIME_TEAM_ID only when non-blank.
    saved_team_id = cfg["team_id"] or None
    env_team = (env.get("PRIME_TEAM_ID") or "").strip()
    if env_team:
        team_id, team_id_source = env_team, "env"
    elif saved_team_id:
        team_id, team_id_source = saved_team_id, team_origin
    else:
        team_id, team_id_source = None, "none"
    team_name = cfg["team_name"] or None
    if team_id is None or team_id != saved_team_id:
        team_name = None

    user_id = env["PRIME_USER_ID"] if "PRIME_USER_ID" in env else (cfg["user_id"] or None)

    env_base = env.get("PRIME_API_BASE_URL") or env.get("PRIME_BASE_URL")
    if env_base:
        base_url, base_url_source = strip_api_v1(env_base), "env"
    else:
        base_url, base_url_source = strip_api_v1(cfg["base_url"]), base_origin

    env_traces = env.get("PRIME_TRACES_URL")
    if env_traces:
        traces_url, traces_url_source = strip_api_v1(env_traces), "env"
    elif cfg["traces_url"]:
        traces_url, traces_url_source = strip_api_v1(cfg["traces_url"]), traces_origin
    else:
        traces_url, traces_url_source = DEFAULT_TRACES_URL, "default"

    env_frontend = env.get("PRIME_FRONTEND_URL")
    frontend_url = (env_frontend or cfg["frontend_url"]).rstrip("/")

    return Settings(
        api_key=SecretStr(api_key),
        api_key_source=api_key_source,
        team_id=team_id,
        team_id_source=team_id_source,
        saved_team_id=saved_team_id,
        team_name=team_name,
        user_id=user_id,
        base_url=base_url,
        base_url_source=base_url_source,
        traces_url=traces_url,
        traces_url_source=traces_url_source,
        frontend_url=frontend_url,
        context_name=context_name,
        current_environment=current_environment,
        config_path=config_path,
        config_error=config_error,
        context_error=context_error,
    )
