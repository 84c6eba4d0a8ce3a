"""``model-factory approve PLAN_ID``: a person approves one plan at an interactive terminal.

The command refuses (exit code 4) unless stdin and stdout are both a terminal and ``--json``
is not given: a pipe, a redirect or machine-readable output means no person is reading.
It needs only the state folder the agent uses (``./.model-factory`` or
``$MODEL_FACTORY_STATE_DIR``): no API key, no platform settings, no forwarded secrets, which
may well live only in the agent's or MCP server's environment. It prints the plan summary
recorded at planning, checks what it can locally (the plan is not already sent, not older than
24 hours, and the config file's bytes still hash to the planned sha256), and asks the person to
type the last four characters of the plan id. Only then does it mint a confirmation code
``mfc_...`` (valid 15 minutes, launches or stops once) bound to the recorded plan hash, to
paste to the agent. ``mf_dispatch_run`` recomputes the whole plan in the agent's process
(config, env files, owner, prices, secret names) and refuses with ``plan_changed``, naming what
moved, if it no longer matches what was approved.

This keeps honest agents and accidental pipes out. An agent that can run arbitrary
programs under the user's account could fake a terminal; a host approval prompt or MCP
elicitation is the stronger channel where one exists.

Exit codes: 0 approved (code printed), 3 the plan cannot be approved (unknown, already
launched, an earlier launch of the same config unresolved and not acknowledged by this plan, too old,
config file missing), 4 refused / not approved / plan changed, 130 interrupted.
"""

from __future__ import annotations

import sys
from typing import TextIO

from skill.exit_codes import EXIT_CONFIRMATION, EXIT_OK, EXIT_TOOL_ERROR

_REFUSED_CODES = frozenset({"plan_changed", "confirmation_required", "approval_refused"})


def _say(text: str, stream: TextIO | None = None) -> None:
    print(text, file=stream or sys.stdout, flush=True)


def approve_at_terminal(plan_id: str, *, as_json: bool = False) -> int:
    """Run the terminal approval for ``plan_id``; returns the process exit code."""
    if as_json:
        _say("Refused: approving a plan needs a person at an interactive terminal; --json output is not "
             "accepted. Run `model-factory approve " + plan_id + "` yourself, without --json.", sys.stderr)
        return EXIT_CONFIRMATION
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        _say("Refused: `model-factory approve` must be run by a person in an interactive terminal (stdin and "
             "stdout are not both a terminal here). Agents cannot approve plans.", sys.stderr)
        return EXIT_CONFIRMATION

    from tools.core import Context
    from tools.errors import ToolFailure
    from tools.launch import approve_plan, plan_request

    ctx = Context.from_environment()
    try:
        try:
            request = plan_request(plan_id, ctx)
        except ToolFailure as failure:
            err = ctx.scrubber.scrub_model(failure.error)
            hint = ("\nPlans live in the state folder of the session that made them: run this in the same project "
                    "folder, or set MODEL_FACTORY_STATE_DIR as the agent's message says."
                    ) if err.code == "unknown_plan" else ""
            from skill.render import as_command  # the fix names tools; a person reads commands

            _say(f"Cannot approve {plan_id}: [{err.code}] {err.message}\nFix: {as_command(err.fix)}{hint}", sys.stderr)
            return EXIT_CONFIRMATION if err.code in _REFUSED_CODES else EXIT_TOOL_ERROR
        _say(ctx.scrubber.scrub_text(request.summary))
        _say("")
        checked = "the plan has not been carried out" + (
            "; the config file is byte for byte the one planned" if request.action == "launch" else "")
        _say(f"This is the plan as recorded at {request.planned_at}. Checked here: {checked}.")
        if request.action == "launch":
            _say("The agent's dispatch recomputes it (config, env files, owner, prices, secret names) and refuses, "
                 "naming what moved, if anything differs from this summary.")
        _say("")
        what = "LAUNCH this run (it spends money)" if request.action == "launch" else "STOP this run (irreversible)"
        key = plan_id[-4:]
        try:
            answer = input(f"To {what}, type the last 4 characters of the plan id ({plan_id[:-4]}____): ")
        except EOFError:
            answer = ""
        if answer.strip() != key:
            _say("Not approved; nothing was done.")
            return EXIT_CONFIRMATION
        try:
            token = approve_plan(plan_id, "terminal", ctx, plan_hash=request.plan_hash)
        except ToolFailure as failure:
            err = ctx.scrubber.scrub_model(failure.error)
            _say(f"Not approved: [{err.code}] {err.message}\nFix: {err.fix}", sys.stderr)
            return EXIT_CONFIRMATION if err.code in _REFUSED_CODES else EXIT_TOOL_ERROR
        tool = "mf_dispatch_run" if request.action == "launch" else "mf_stop_run"
        _say(f"Approved. Confirmation code (valid {request.ttl_seconds // 60} minutes, works once):\n\n  {token}\n\n"
             f"Paste it to the agent; it passes it to {tool} as `confirmation`.")
        return EXIT_OK
    finally:
        ctx.close()
