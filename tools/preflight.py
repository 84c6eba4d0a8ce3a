"""Preflight: can this machine use Model Factory, and as whom?

One call, bounded in time: every HTTP request uses a short timeout and no retries, every
subprocess a short timeout, and the three groups (local programs, platform API, traces
host) run side by side. Nothing is written and no key is ever shown.

Checks (name: what it looks at; the required ones decide ``ok``):

- ``api_key`` (required): settings (``PRIME_API_KEY`` / context / ``~/.prime/config.json``): where the key came from.
- ``config_file`` (required): ``~/.prime/config.json`` and the active context parse (settings ``config_error`` /
  ``context_error``).
- ``api_reachable`` (required): GET ``/user/whoami`` answered at all (any HTTP status).
- ``api_key_valid`` (required): GET ``/user/whoami`` not 401/403.
- ``owner`` (required): the owner (resolved non-strictly, with the CLI's precedence) + GET ``/user/teams``; a
  configured team must be one of the key's teams. An owner that a launch would call ambiguous is a warning (pass
  ``team`` when planning).
- ``traces_host``: GET ``/runs?limit=1`` on the traces host answered.
- ``prime_cli``: ``prime`` on ``PATH`` of the context env, ``prime --version`` = 0.18.x, no second ``prime``
  shadowing it.
- ``uv``: ``uv --version`` (``prime train validate`` needs uv for the prime-rl schema venv).
- ``prime_rl_checkout``: an interpreter that can run the real prime-rl schema for mf_validate_config
  (:func:`tools.configs.find_interpreters`: ``MODEL_FACTORY_SCHEMA_PYTHON``, a checkout at ``$PRIME_RL_DIR`` or
  around the working folder, a ready schema venv of the prime CLI under ``~/.cache/prime/training-schemas``).
"""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tools.configs import checkout_problem, find_interpreters
from tools.core import Context, Owner, resolve_owner, tool
from tools.errors import ToolFailure
from tools.platform import errors as perr
from tools.platform.client import PlatformClient
from tools.platform.settings import home_folder
from tools.platform.wire import Team

#: Teams shown in the report (the rest: mf_list_teams), to stay within the output budget.
MAX_TEAMS_SHOWN = 20
SUPPORTED_PRIME = re.compile(r"^0\.18\.\d+")
_PRIME_VERSION = re.compile(r"Prime CLI version:\s*(\S+)")
_UV_VERSION = re.compile(r"^uv\s+(\S+)")
_NO_KEY_FIX = ("Set PRIME_API_KEY in the environment this agent runs in, or run `prime login` in a terminal (needs "
               "the prime CLI); never paste the key into a chat or a tool argument. Then call mf_preflight again.")

#: The local emulator's fixed key for its default user (skill/emulator/seed.py DEFAULT_API_KEY, in its README); not
#: a secret: it opens nothing but the emulator.
EMULATOR_API_KEY = "mf-emulator-key-0000"
_EMULATOR_KEY_FIX = (f"Set PRIME_API_KEY to the emulator's key, {EMULATOR_API_KEY} (its banner prints it with the "
                     "other exports when `model-factory emulator` starts), then call mf_preflight again. A platform "
                     "key does not work there; to use the platform instead, unset PRIME_API_BASE_URL and "
                     "PRIME_TRACES_URL.")


class Check(BaseModel):
    """One preflight check. ``ok`` is null when the check was skipped (``detail`` says why)."""

    name: str = Field(description="Check name: api_key, config_file, api_reachable, api_key_valid, owner, "
                                  "traces_host, prime_cli, uv, prime_rl_checkout.")
    ok: bool | None = Field(description="true = fine, false = problem, null = not checked.")
    required: bool = Field(description="true when a launch needs this check to pass; false = advisory.")
    code: str = Field(description="Stable code: ok, or the problem (api_key_missing, api_unreachable, ...).")
    detail: str = Field(description="What was found (versions, sources, URLs); never a key.")
    fix: str | None = Field(default=None, description="The next command or call when not ok.")


class TeamInfo(BaseModel):
    """A team the key belongs to (GET /user/teams)."""

    team_id: str = Field(description="Team id (CUID).")
    name: str | None = Field(description="Team name.")
    role: str | None = Field(description="Your role in the team (ADMIN, MEMBER, ...).")


class PreflightResult(BaseModel):
    """Result of :func:`preflight`."""

    ok: bool = Field(description="true when every required check that ran passed (see summary for skipped ones).")
    summary: str = Field(description="One line: ready or not, and the first thing to fix.")
    checks: list[Check] = Field(description="Every check, required ones first.")
    base_url: str = Field(description="Platform API root used (PRIME_API_BASE_URL or config).")
    traces_url: str = Field(description="Traces host root used (PRIME_TRACES_URL or config).")
    api_key_source: str = Field(description="env, context, config or none. The key itself is never shown.")
    user_id: str | None = Field(description="User id the key authenticates as (GET /user/whoami), when checked.")
    owner: Owner | None = Field(description="Owner a request would act for by default, and where that came from.")
    teams: list[TeamInfo] = Field(description=f"Teams of this key (GET /user/teams), at most {MAX_TEAMS_SHOWN}; "
                                              "empty when not checked. mf_list_teams lists all.")
    teams_total: int = Field(description="Number of teams of this key (0 when not checked).")
    launch_would_stop_ambiguous: bool | None = Field(
        description="true when no team is configured but the key has teams: mf_plan_run stops until a team is named; "
                    "null when unknown.")


class PreflightInput(BaseModel):
    """Input of :func:`preflight`."""

    model_config = ConfigDict(extra="forbid")

    check_api: bool = Field(default=True,
                            description="Contact the platform and traces host (false = local checks only).")
    timeout_seconds: float = Field(default=5.0, gt=0, le=30,
                                   description="Timeout in seconds of each HTTP request and subprocess.")


# --------------------------------------------------------------------------------------
# Local programs
# --------------------------------------------------------------------------------------


def _on_path(name: str, path: str) -> list[Path]:
    """Every executable called ``name`` on ``path``, in lookup order, duplicates removed."""
    found: list[Path] = []
    for folder in path.split(os.pathsep):
        candidate = Path(folder or ".") / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            real = candidate.resolve()
            if all(real != f.resolve() for f in found):
                found.append(candidate)
    return found


def _run(argv: list[str], env: dict[str, str], timeout: float) -> tuple[str | None, str]:
    """(stdout+stderr text, '') or (None, why it failed)."""
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"`{' '.join(argv)}` did not answer within {timeout:g} s"
    except OSError as exc:
        return None, f"`{' '.join(argv)}` could not run ({exc.strerror or exc})"
    text = (done.stdout or "") + (done.stderr or "")
    if done.returncode != 0:
        return None, f"`{' '.join(argv)}` exited with {done.returncode}: {text.strip()[:200]}"
    return text, ""


def _subprocess_env(ctx: Context) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "UV_CACHE_DIR")
    env = {k: ctx.env[k] for k in keep if k in ctx.env}
    env["PRIME_DISABLE_VERSION_CHECK"] = "1"  # no PyPI lookup from a preflight
    return env


def check_prime_cli(ctx: Context, timeout: float) -> Check:
    """``prime`` on ctx.env PATH: found, version 0.18.x, the Prime Intellect CLI, not shadowed."""
    fix_install = ("Optional: install the prime CLI with `uv tool install prime==0.18.0` (for `prime train "
                   "validate` and `prime volumes get`).")

    found = _on_path("prime", ctx.env.get("PATH", ""))
    if not found:
        return Check(name="prime_cli", ok=False, required=False, code="prime_not_found",
                     detail="No `prime` on PATH (the tools do not need it).",
                     fix=fix_install)
    first = found[0]
    text, why = _run([str(first), "--version"], _subprocess_env(ctx), timeout)
    if text is None:
        return Check(name="prime_cli", ok=False, required=False, code="prime_version_failed",
                     detail=f"{first}: {why}", fix=fix_install)
    match = _PRIME_VERSION.search(text)
    if match is None:
        return Check(name="prime_cli", ok=False, required=False, code="prime_not_prime_intellect",
                     detail=f"{first} is not the Prime Intellect CLI (`--version` said {text.strip()[:80]!r}).",
                     fix=f"Put the Prime Intellect CLI first on PATH, or remove {first}. {fix_install}")
    version = match[1]
    others = ", ".join(str(p) for p in found[1:])
    if others:
        return Check(name="prime_cli", ok=False, required=False, code="prime_shadowed",
                     detail=f"prime {version} at {first} shadows other `prime` executables: {others}.",
                     fix="Keep one `prime` on PATH (the one `which -a prime` lists first is used).")
    if not SUPPORTED_PRIME.match(version):
        return Check(name="prime_cli", ok=False, required=False, code="prime_version_unsupported",
                     detail=f"prime {version} at {first}; this skill follows prime 0.18.x.",
                     fix="`uv tool install prime==0.18.0` (other versions may differ on the wire).")
    return Check(name="prime_cli", ok=True, required=False, code="ok", detail=f"prime {version} at {first}.")


def check_uv(ctx: Context, timeout: float) -> Check:
    """``uv --version``: uv builds the prime-rl schema venv for ``prime train validate``."""
    found = _on_path("uv", ctx.env.get("PATH", ""))
    fix = "Optional: install uv (https://docs.astral.sh/uv/) for `prime train validate` (needs the prime CLI)."
    if not found:
        return Check(name="uv", ok=False, required=False, code="uv_not_found", detail="No `uv` on PATH.", fix=fix)
    text, why = _run([str(found[0]), "--version"], _subprocess_env(ctx), timeout)
    match = _UV_VERSION.search(text or "")
    if match is None:
        return Check(name="uv", ok=False, required=False, code="uv_version_failed",
                     detail=why or f"{found[0]} --version said {(text or '').strip()[:80]!r}", fix=fix)
    return Check(name="uv", ok=True, required=False, code="ok", detail=f"uv {match[1]} at {found[0]}.")


def check_prime_rl(ctx: Context) -> Check:
    """The interpreters that could run the real prime-rl schema for mf_validate_config, as
    :func:`tools.configs.find_interpreters` finds them (``MODEL_FACTORY_SCHEMA_PYTHON``,
    ``PRIME_RL_DIR`` or the working folder's prime-rl checkout, the prime CLI's ready schema venvs).
    Found only: whether one works is known when it first validates (mf_validate_config says)."""
    home = home_folder(ctx.env, ctx.home)
    found = find_interpreters(env=ctx.env, home=home, cwd=ctx.cwd)
    checkout = ctx.env.get("PRIME_RL_DIR", "").strip()
    not_checkout = (f"PRIME_RL_DIR={checkout} is not a prime-rl checkout (no packages/prime-rl-configs/pyproject.toml)"
                    if checkout and checkout_problem(Path(checkout)) else "")
    if found:
        shown = [f"{i.label} ({i.origin}{', prime-rl ' + i.commit[:12] if i.commit else ''})" for i in found[:3]]
        more = f" (+{len(found) - 3} more)" if len(found) > 3 else ""
        detail = "The real prime-rl schema can run with: " + "; ".join(shown) + more + "."
        return Check(name="prime_rl_checkout", ok=True, required=False, code="ok",
                     detail=detail + (f" Note: {not_checkout}." if not_checkout else ""))
    detail = ("No interpreter with prime-rl: MODEL_FACTORY_SCHEMA_PYTHON unset, "
              + (not_checkout if not_checkout else "PRIME_RL_DIR unset") + ", no prime-rl checkout here, no ready "
              f"schema venv of the prime CLI under {home / '.cache' / 'prime' / 'training-schemas'}.")
    return Check(name="prime_rl_checkout", ok=False, required=False, code="prime_rl_missing", detail=detail,
                 fix="Optional: validate-config uses the schema snapshot shipped here. For prime-rl's own classes set "
                     "PRIME_RL_DIR to a prime-rl checkout (uv sync in it) or MODEL_FACTORY_SCHEMA_PYTHON to a Python "
                     "with prime-rl-configs, or run `prime train validate CONFIG` once (needs the prime CLI and uv).")


# --------------------------------------------------------------------------------------
# Platform and traces host
# --------------------------------------------------------------------------------------


class _Api(BaseModel):
    """What the platform group found."""

    checks: list[Check]
    user_id: str | None = None
    owner: Owner | None = None
    teams: list[TeamInfo] = []
    ambiguous: bool | None = None


def _skipped(name: str, why: str, required: bool = True) -> Check:
    return Check(name=name, ok=None, required=required, code="skipped", detail=f"Not checked: {why}.")


def _platform_checks(ctx: Context, timeout: float) -> _Api:
    settings = ctx.settings
    base = settings.base_url
    client = ctx.platform_client(ctx.http_timeouts().capped(timeout, connect_seconds=3.0), attempts=1)
    try:
        try:
            who = client.whoami()
        except perr.Unavailable as exc:
            if exc.status is None:
                return _Api(checks=[
                    Check(name="api_reachable", ok=False, required=True, code="api_unreachable",
                          detail=f"No answer from {base} ({exc.message}).",
                          fix="Check PRIME_API_BASE_URL and the network; for the local emulator run "
                              "`model-factory emulator` and point PRIME_API_BASE_URL at it."),
                    _skipped("api_key_valid", "the API is unreachable"), _skipped("owner", "the API is unreachable")])
            return _Api(checks=[
                Check(name="api_reachable", ok=False, required=True, code="api_error",
                      detail=f"{base} answered HTTP {exc.status}: {exc.message}",
                      fix="The platform is having trouble; retry mf_preflight in a minute."),
                _skipped("api_key_valid", "the API answered with a server error"),
                _skipped("owner", "the API answered with a server error")])
        except (perr.Unauthorized, perr.Forbidden) as exc:
            reachable = Check(name="api_reachable", ok=True, required=True, code="ok", detail=f"{base} answered.")
            emulator = isinstance(exc, perr.Unauthorized) and client.is_local_emulator()
            return _Api(checks=[reachable, Check(
                name="api_key_valid", ok=False, required=True, code="api_key_invalid",
                detail=f"{base} rejected the API key from {settings.api_key_source} (HTTP {exc.status})"
                       + (": it is the local Model Factory emulator, which accepts only its own keys." if emulator
                          else "."),
                fix=_EMULATOR_KEY_FIX if emulator else
                    "Create a new key in the Prime Intellect dashboard and set PRIME_API_KEY (or `prime login`, "
                    "with the prime CLI); check PRIME_API_BASE_URL points at the platform that issued the key."),
                _skipped("owner", "the API key was rejected")])
        reachable = Check(name="api_reachable", ok=True, required=True, code="ok", detail=f"{base} answered.")
        valid = Check(name="api_key_valid", ok=True, required=True, code="ok",
                      detail=f"Key from {settings.api_key_source} authenticates as user {who.id}.")
        api = _Api(checks=[reachable, valid], user_id=who.id)
        api.checks.append(_owner_check(ctx, client, api))
        return api
    except perr.PlatformError as exc:  # an unexpected shape or status: report, never raise
        return _Api(checks=[Check(name="api_reachable", ok=False, required=True, code=exc.code,
                                  detail=exc.message,
                                  fix="Retry mf_preflight; if it persists, check PRIME_API_BASE_URL.")])
    finally:
        client.close()


def _owner_check(ctx: Context, client: PlatformClient, api: _Api) -> Check:
    try:
        owner = resolve_owner(ctx, None, strict=False)
    except ToolFailure as failure:
        return Check(name="owner", ok=False, required=True, code=failure.error.code, detail=failure.error.message,
                     fix=failure.error.fix)
    try:
        teams: list[Team] = client.list_all_teams(max_pages=5)
    except perr.PlatformError as exc:
        api.owner = owner
        return Check(name="owner", ok=False, required=True, code="teams_unavailable",
                     detail=f"Owner {owner.label} ({owner.source}); GET /user/teams failed: {exc.message}",
                     fix="Retry mf_preflight; then mf_list_teams.")
    api.teams = [TeamInfo(team_id=t.team_id, name=t.name, role=t.role) for t in teams]
    by_id = {t.team_id: t for t in teams}
    if owner.kind == "team":
        if owner.team_id not in by_id:
            api.owner, api.ambiguous = owner, False
            return Check(name="owner", ok=False, required=True, code="team_not_member",
                         detail=f"Configured team {owner.team_id} ({owner.source}) is not one of this key's teams.",
                         fix="Call mf_list_teams and set PRIME_TEAM_ID to one of its ids, or unset it for the "
                             "personal account.")
        owner = owner.model_copy(update={"team_name": owner.team_name or by_id[owner.team_id].name})
    api.owner = owner
    api.ambiguous = owner.source == "default" and bool(teams)
    detail = f"Requests act for {owner.label} (source: {owner.source})."
    if owner.note:
        detail += f" Note: {owner.note}"
    if api.ambiguous:
        return Check(name="owner", ok=False, required=False, code="owner_ambiguous",
                     detail=detail + f" No team is configured but the key belongs to {len(teams)} team(s): a launch "
                                     "stops until the user says who pays.",
                     fix="Ask the user which owner pays, then plan with the team set to personal or a team id (or "
                         "set PRIME_TEAM_ID).")
    return Check(name="owner", ok=True, required=True, code="ok", detail=detail)


def _traces_check(ctx: Context, timeout: float, team_id: str | None) -> Check:
    url = ctx.settings.traces_url
    client = ctx.traces_client(ctx.http_timeouts().capped(timeout, connect_seconds=3.0), attempts=1)
    try:
        client.list_runs(limit=1, team_id=team_id)
    except perr.Unavailable as exc:
        if exc.status is None:
            return Check(name="traces_host", ok=False, required=False, code="traces_unreachable",
                         detail=f"No answer from {url} ({exc.message}).",
                         fix="Check PRIME_TRACES_URL; traces downloads need it (launching does not).")
        return Check(name="traces_host", ok=False, required=False, code="traces_error",
                     detail=f"{url} answered HTTP {exc.status}.", fix="Retry later; launching does not need it.")
    except perr.PlatformError as exc:
        if exc.status is None:
            return Check(name="traces_host", ok=False, required=False, code=exc.code, detail=exc.message,
                         fix="Check PRIME_TRACES_URL.")
        return Check(name="traces_host", ok=True, required=False, code="ok",
                     detail=f"{url} answered (HTTP {exc.status} to a probe).")
    finally:
        client.close()
    return Check(name="traces_host", ok=True, required=False, code="ok", detail=f"{url} answered.")


# --------------------------------------------------------------------------------------
# The tool
# --------------------------------------------------------------------------------------


def _key_checks(ctx: Context) -> list[Check]:
    s = ctx.settings
    if s.api_key_problem:
        key = Check(name="api_key", ok=False, required=True, code="api_key_malformed",
                    detail=f"API key found, but {s.api_key_problem}: it cannot be sent.",
                    fix="Set PRIME_API_KEY again to the key alone, with no spaces or newline (for a key in a file: "
                        "`export PRIME_API_KEY=\"$(tr -d '[:space:]' < key.txt)\"`), or run `prime login` (needs the "
                        "prime CLI).")
    elif s.has_api_key:
        key = Check(name="api_key", ok=True, required=True, code="ok",
                    detail=f"API key found (source: {s.api_key_source}; value not shown).")
    else:
        key = Check(name="api_key", ok=False, required=True, code="api_key_missing",
                    detail="No API key: PRIME_API_KEY is unset and no key is saved in ~/.prime.", fix=_NO_KEY_FIX)
    problems = [p for p in (s.config_error, s.context_error) if p]
    if problems:
        config = Check(name="config_file", ok=False, required=True, code="config_invalid", detail="; ".join(problems),
                       fix="Fix or remove the file named (the prime CLI fails on it too), or unset PRIME_CONTEXT.")
    else:
        where = s.config_path if s.config_path and s.config_path.exists() else "no ~/.prime/config.json (fine)"
        context = f"; context {s.context_name}" if s.context_name else ""
        config = Check(name="config_file", ok=True, required=True, code="ok", detail=f"{where}{context}.")
    return [key, config]


@tool
def preflight(inp: PreflightInput, ctx: Context) -> PreflightResult:
    """Check that this machine can use Model Factory (see the module docstring for each check).

    Bounded in time: HTTP requests and subprocesses use ``timeout_seconds`` (default 5 s)
    with no retries; the local-program, platform and traces checks run concurrently. Works
    with no API key (``api_key`` fails, API checks are skipped) and with the API down
    (``api_reachable`` fails). Never returns a ToolError for a failed check: failures are
    rows with ``ok: false`` and a ``fix``.
    """
    timeout = inp.timeout_seconds
    checks = _key_checks(ctx)
    settings = ctx.settings
    run_api = inp.check_api and settings.has_api_key and not settings.api_key_problem
    why_not = ("check_api is false" if not inp.check_api else "the API key cannot be sent"
               if settings.api_key_problem else "no API key")
    with ThreadPoolExecutor(max_workers=4) as pool:
        local = [pool.submit(check_prime_cli, ctx, timeout), pool.submit(check_uv, ctx, timeout)]
        api_future = pool.submit(_platform_checks, ctx, timeout) if run_api else None
        traces_future = pool.submit(_traces_check, ctx, timeout, settings.team_id) if run_api else None
        rl = check_prime_rl(ctx)
        api = api_future.result() if api_future else _Api(checks=[
            _skipped("api_reachable", why_not), _skipped("api_key_valid", why_not), _skipped("owner", why_not)])
        traces = traces_future.result() if traces_future else _skipped("traces_host", why_not, required=False)
        checks += api.checks + [traces] + [f.result() for f in local] + [rl]
    if api.owner is None and not run_api:
        try:
            api.owner = resolve_owner(ctx, None, strict=False)
        except ToolFailure:
            api.owner = None
    checks.sort(key=lambda c: not c.required)
    failed = [c for c in checks if c.required and c.ok is False]
    skipped = [c.name for c in checks if c.required and c.ok is None]
    if failed:
        summary = f"Not ready: {failed[0].name} ({failed[0].code}). {failed[0].fix or ''}".strip()
    elif skipped:
        summary = f"Local checks pass; not checked: {', '.join(skipped)} ({why_not})."
    else:
        summary = ("Ready: credentials and API are fine; name the owner when planning (team id or "
                   "'personal'): this account has teams and none is configured." if api.ambiguous
                   else "Ready: credentials, API and owner are fine.")
    return PreflightResult(
        ok=not failed, summary=summary, checks=checks, base_url=settings.base_url, traces_url=settings.traces_url,
        api_key_source=settings.api_key_source, user_id=api.user_id, owner=api.owner,
        teams=api.teams[:MAX_TEAMS_SHOWN], teams_total=len(api.teams),
        launch_would_stop_ambiguous=api.ambiguous)
