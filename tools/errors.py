"""The one error shape every tool returns: :class:`ToolError`, and its codes, :data:`ErrorCode`.

Tools never let an exception escape to the agent. Inside a tool, raise
:class:`ToolFailure` (or let a :class:`~tools.platform.errors.PlatformError` propagate);
the ``@tool`` wrapper in :mod:`tools.core` turns either into a :class:`ToolError`
whose ``fix`` names the next call or command.

A hint that names a tool call (an error's ``fix``, a result's ``next_step``) also carries it as a
:class:`Call` (``next_calls``): the tool and its complete arguments. The text quotes each call as
``str(call)`` (``mf_get_logs(run_id="r1", component="env-server")``); agents may use either form,
and the command line shows each one as the command a person pastes
(``model-factory get-logs r1 --component env-server``), replacing exactly that quoted text, so no
surface parses prose. Build them with :func:`call`; name every argument a call needs (the ids
filled in), never a placeholder.

Every code is named once, in :data:`ErrorCode` (the platform's own in
:data:`tools.platform.errors.PlatformCode`); ``ToolError.code`` is typed with it, so agents see
an enum in each tool's output schema, and docs/ARCHITECTURE.md says what each one means (a test
keeps the two lists equal).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from tools.platform import errors as perr
from tools.units import Seconds

#: Every ``ToolError.code``. A new code goes here and in docs/ARCHITECTURE.md ("Error codes"); the
#: CLI's exit code for it is 3 unless skill.exit_codes maps it to another.
ErrorCode = Literal[
    perr.PlatformCode,  # the platform's answers, mapped by from_platform()
    # calls and arguments (skill.registry, the @tool wrapper)
    "bad_arguments", "unknown_tool", "internal_error", "file_error", "dependency_missing",
    # secrets by name (tools.guardrails.secret_detection)
    "secret_in_input", "unsupported_secret", "secret_not_set", "env_file_invalid",
    # configs
    "config_not_found", "invalid_toml", "invalid_config", "dest_exists", "write_failed",
    # owner and plan facts
    "invalid_team", "owner_ambiguous", "invalid_context", "volume_not_found",
    # checkpoints on a volume (tools.monitor.checkpoints, tools.core volume reads)
    "no_volume", "checkpoint_not_ready", "transfer_unavailable", "unsafe_path", "checksum_mismatch",
    # the confirmation gate and the state store
    "unknown_plan", "plan_changed", "plan_expired", "confirmation_required", "confirmation_invalid",
    "confirmation_expired", "confirmation_used", "approval_refused", "already_dispatched", "ambiguous_launch",
    "unresolved_launch", "state_busy", "state_read_only", "state_unusable",
]


class FieldProblem(BaseModel):
    """One bad field: ``path`` is a dotted location (``config.trainer.lr`` or ``max_steps``)."""

    path: str = Field(description="Dotted location of the bad value ('' for the whole input).")
    problem: str = Field(description="What was expected, in words. Never contains a secret value.")


class Call(BaseModel):
    """A tool call a hint recommends: ``tool`` (``mf_`` name) and its complete ``arguments``.

    ``str(call)`` is the form hints quote: ``mf_get_run(run_id="crun1")``, arguments in the
    order given, values as JSON. The CLI renders it as ``model-factory get-run crun1``
    (skill/render.py)."""

    tool: str = Field(description="The tool to call (mf_ name).")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Its arguments, complete (ids filled in).")

    def __str__(self) -> str:
        return f"{self.tool}({', '.join(f'{k}={json.dumps(v)}' for k, v in self.arguments.items())})"


def call(tool: str, **arguments: Any) -> Call:
    """``call("mf_get_logs", run_id=r, component="env-server")``: a :class:`Call`; None values are
    left out (the tool's default applies)."""
    return Call(tool=tool, arguments={k: v for k, v in arguments.items() if v is not None})


class ToolError(BaseModel):
    """A tool failed. Returned instead of the tool's result model.

    ``retryable``: repeating the same call later may succeed (rate limit, outage).
    ``ambiguous``: the call may have taken effect (a launch whose answer was lost); do not
    repeat it, reconcile instead. ``fix`` is always an actionable next step.
    """

    error: bool = Field(default=True, description="Always true; tells a ToolError apart from a result.")
    code: ErrorCode = Field(description="Stable machine code, e.g. not_found, unauthorized, confirmation_required.")
    message: str = Field(description="What went wrong, for a human.")
    retryable: bool = Field(default=False, description="True when the same call may succeed later.")
    ambiguous: bool = Field(default=False, description="True when the call may have taken effect; never repeat it.")
    fix: str = Field(description="The next call or command that resolves this.")
    next_calls: list[Call] = Field(default_factory=list,
                                   description="The tool calls the fix names, each with its complete arguments.")
    fields: list[FieldProblem] = Field(default_factory=list, description="Per-field problems, when the input was bad.")
    retry_after_seconds: Seconds | None = Field(default=None,
                                                description="Seconds to wait before retrying, when known.")


class ToolFailure(Exception):
    """Raised inside a tool to return ``error`` to the caller."""

    def __init__(self, error: ToolError) -> None:
        super().__init__(error.message)
        self.error = error


def fail(code: ErrorCode, message: str, fix: str, **extra: Any) -> ToolFailure:
    """Build a :class:`ToolFailure` in one line:
    ``runs = call("mf_list_runs"); raise fail("not_found", "...", f"Check the id: {runs}.", next_calls=[runs])``."""
    return ToolFailure(ToolError(code=code, message=message, fix=fix, **extra))


_PREFLIGHT, _TEAMS, _RUNS, _LAUNCHES = call("mf_preflight"), call("mf_list_teams"), call("mf_list_runs"), \
    call("mf_list_launches")

#: The fix of each platform error class, and the calls it names.
_FIXES: dict[type[perr.PlatformError], tuple[str, list[Call]]] = {
    perr.CredentialsMissing: (
        "Set PRIME_API_KEY in the environment of this process, or run `prime login` (needs the prime CLI); never "
        f"paste the key into a tool argument. Then check with {_PREFLIGHT}.", [_PREFLIGHT]),
    perr.Unauthorized: (
        "The API key was rejected: check PRIME_API_KEY (or `prime login`, which needs the prime CLI), and that "
        f"PRIME_API_BASE_URL points at the right platform; then check with {_PREFLIGHT}.", [_PREFLIGHT]),
    perr.PaymentRequired: (
        "Add credit or a billing method for this owner in the Prime Intellect dashboard, then retry.", []),
    perr.Forbidden: (
        f"The key cannot act for this owner: check the team (PRIME_TEAM_ID; the key's teams: {_TEAMS}) and your "
        "role in it.", [_TEAMS]),
    perr.NotFound: (
        f"Check the id and the owner: {_RUNS} lists the runs (they belong to the team that launched them; name the "
        "team if needed).", [_RUNS]),
    perr.Conflict: ("Read the current state (mf_get_run) and act on it; the request does not fit that state.", []),
    perr.RateLimited: ("Wait retry_after_seconds (or about 10 s), then repeat the same read.", []),
    perr.Unavailable: (
        "The platform could not be reached or answered with a server error: check PRIME_API_BASE_URL and your "
        f"network ({_PREFLIGHT}), then retry the read.", [_PREFLIGHT]),
    perr.InvalidRequest: ("Correct the listed fields and call again.", []),
    perr.Ambiguous: (
        "Do not repeat the request. Reconcile first: call mf_dispatch_run with the same plan id (it only "
        f"reconciles), or see {_LAUNCHES}.", [_LAUNCHES]),
}


def from_platform(exc: perr.PlatformError) -> ToolError:
    """Map a :class:`~tools.platform.errors.PlatformError` to a :class:`ToolError`.

    The ``fix`` (and its ``next_calls``) comes from the error class; ``Unavailable`` with
    ``sent=False`` is marked not ambiguous (nothing left this machine).
    """
    fix, calls = next((f for cls, f in _FIXES.items() if isinstance(exc, cls)),
                      (f"Check with {_PREFLIGHT}.", [_PREFLIGHT]))
    if isinstance(exc, perr.NotFound) and exc.service_code == "not_the_api":
        fix = ("Check that PRIME_API_BASE_URL (and PRIME_TRACES_URL) point at the Model Factory API "
               "(default https://api.primeintellect.ai; the local emulator: `model-factory emulator`), "
               f"then check with {_PREFLIGHT}.")
        calls = [_PREFLIGHT]
    if isinstance(exc, perr.InvalidRequest) and not exc.field_errors:  # no fields to correct: say what to do
        fix = ("Check the arguments against what the message says; if it is about the platform's answer (its shape), "
               f"retry once, then check PRIME_API_BASE_URL with {_PREFLIGHT}.")
        calls = [_PREFLIGHT]
    ambiguous = exc.ambiguous
    if isinstance(exc, perr.Unavailable) and not exc.sent:
        fix = ("Nothing was sent: the platform is not reachable. Check PRIME_API_BASE_URL (for the local emulator "
               "start `model-factory emulator`), then retry.")
        calls = []
    return ToolError(
        code=exc.code,
        message=exc.message,
        retryable=exc.retryable,
        ambiguous=ambiguous,
        fix=fix,
        next_calls=calls,
        fields=[FieldProblem(path=loc, problem=msg) for loc, msg in exc.field_errors],
        retry_after_seconds=exc.retry_after,
    )


def from_os_error(exc: OSError) -> ToolError:
    """Map a file-system failure (a path that cannot be read or written) to ``file_error``.

    The message names the path and the operating system's reason; the fix asks for another path.
    """
    where = f" ({exc.filename})" if exc.filename else ""
    return ToolError(
        code="file_error",
        message=f"A file operation failed{where}: {exc.strerror or exc}.",
        fix="Check the path: it must be in a folder you can read and write (not inside a file, not a "
            "system folder such as /proc). Pick another path, then call again.",
    )
