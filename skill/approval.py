"""``model-factory approve PLAN_ID``: a person approves one plan at an interactive terminal.

The command refuses (exit code 4) unless stdin and stdout are both a terminal and ``--json``
is not given: a pipe, a redirect or machine-readable output means no person is reading.
It needs only the state folder the agent uses (``./.model-factory`` or
``$MODEL_FACTORY_STATE_DIR``): no API key, no platform settings, no forwarded secrets, which
may well live only in the agent's or MCP server's environment. It prints the plan summary
recorded at planning, checks what it can locally (the plan is not already sent, not older than
24 hours, and the config file's bytes still hash to the planned sha256), and asks the person to
type the last four characters of the plan id (three tries: a typo is not a refusal). Only then
does it mint a confirmation code
``mfc_...`` (valid 15 minutes, works once) bound to the recorded plan hash, to
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
from typing import Any, TextIO

from skill.exit_codes import EXIT_CONFIRMATION, EXIT_OK, EXIT_TOOL_ERROR

#: How many times the person may type the plan id's last four characters.
TRIES = 3
_REFUSED_CODES = frozenset({"plan_changed", "confirmation_required", "approval_refused"})


def _say(text: str, stream: TextIO | None = None) -> None:
    """``text`` for the person, wrapped to their terminal's width: at spaces only, each command
    on a line of its own, bare, so it pastes whole (see :mod:`skill.terminal`)."""
    from skill import terminal

    term = terminal.Terminal.of(stream or sys.stdout)
    for line in terminal.wrap(text, term.width, commands=True):
        term.print(line)


def approve_at_terminal(plan_id: str, *, as_json: bool = False) -> int:
    """Run the terminal approval for ``plan_id``; returns the process exit code."""
    from tools.core import shell_command

    if as_json:
        _say("Refused: approving a plan needs a person at an interactive terminal; --json output is not "
             f"accepted. Run `{shell_command(['approve', plan_id])}` yourself, without --json.", sys.stderr)
        return EXIT_CONFIRMATION
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        _say("Refused: `model-factory approve` must be run by a person in an interactive terminal (stdin and "
             "stdout are not both a terminal here). Agents cannot approve plans.", sys.stderr)
        return EXIT_CONFIRMATION

    from tools.core import Context
    from tools.errors import ToolFailure
    from tools.guardrails.text import shown
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
            from skill.render import for_people  # the fix names tools; a person reads commands

            fix = for_people(err.fix, err.next_calls)
            _say(f"Cannot approve {shown(plan_id)}: [{err.code}] {shown(err.message)}\nFix: {fix}{hint}", sys.stderr)
            return EXIT_CONFIRMATION if err.code in _REFUSED_CODES else EXIT_TOOL_ERROR
        from skill import terminal

        for line in terminal.block(ctx.scrubber.scrub_text(request.summary).splitlines(), terminal.stdout().width):
            print(line, flush=True)
        _say("")
        checked = "the plan has not been carried out" + (
            "; the config file is byte for byte the one planned" if request.action == "launch" else "")
        _say(f"This is the plan as recorded at {request.planned_at}. Checked here: {checked}.")
        if request.action == "launch":
            _say("The agent's dispatch recomputes it (config, env files, owner, prices, secret names) and refuses, "
                 "naming what moved, if anything differs from this summary.")
        _say("")
        what = _WHAT[request.action]
        key = plan_id[-4:]
        for attempt in range(1, TRIES + 1):
            question = terminal.wrap(f"To {what}, type the last 4 characters of the plan id ({plan_id[:-4]}____):",
                                     terminal.stdout().width)
            for line in question[:-1]:
                print(line, flush=True)
            try:
                answer = terminal.ask(question[-1] + " ")
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the message that follows starts on a line of its own
                print(flush=True)
                raise
            if answer is not None and answer.strip() == key:
                break
            if answer is None or attempt == TRIES:
                again = "" if answer is None else f" To try again, run `{_approve_again(plan_id, ctx)}`."
                _say(f"Not approved; nothing was done.{again}")
                return EXIT_CONFIRMATION
            _say(f"That is not {plan_id[:-4]}____'s ending ({TRIES - attempt} more "
                 f"{'try' if TRIES - attempt == 1 else 'tries'}; Ctrl-C to stop).")
        try:
            token = approve_plan(plan_id, "terminal", ctx, plan_hash=request.plan_hash)
        except ToolFailure as failure:
            err = ctx.scrubber.scrub_model(failure.error)
            from skill.render import for_people

            _say(f"Not approved: [{err.code}] {shown(err.message)}\nFix: {for_people(err.fix, err.next_calls)}",
                 sys.stderr)
            return EXIT_CONFIRMATION if err.code in _REFUSED_CODES else EXIT_TOOL_ERROR
        _say(f"Approved. Confirmation code (valid {request.ttl_seconds // 60} minutes, works once):")
        from skill import terminal

        print(f"\n{terminal.fit_alone('  ' + token, terminal.stdout().width)}\n", flush=True)  # whole at any width
        _say("Paste it to the agent that asked for this approval, or run this yourself (in a shell with the agent's "
             f"Model Factory settings and secrets): `{_carry_out(request, token, ctx)}`")
        return EXIT_OK
    finally:
        ctx.close()


def _approve_again(plan_id: str, ctx: Any) -> str:
    """The approve command again, naming the state folder (the plan lives there)."""
    from tools.core import STATE_DIR_ENV, shell_command

    return shell_command(["approve", plan_id], assignments={STATE_DIR_ENV: str(ctx.state_path().resolve())})


def _carry_out(request: Any, token: str, ctx: Any) -> str:
    """The command that carries the approved plan out: dispatch (launch), or the control command
    (resume, stop, pause, restart) of the run, with the code, the state folder named (the plan lives there)."""
    from tools.core import STATE_DIR_ENV, shell_command

    state = {STATE_DIR_ENV: str(ctx.state_path().resolve())}
    if request.action == "launch":
        return shell_command(["dispatch-run", request.plan_id, "--confirmation", token], assignments=state)
    return shell_command([f"{request.action}-run", str(request.run_id), "--confirmation", token], assignments=state)


#: What the person is asked to approve, by plan action.
_WHAT = {"launch": "LAUNCH this run (it spends money)",
         "resume": "RESUME this run as a NEW run (it spends money)",
         "stop": "STOP this run (irreversible)",
         "pause": "PAUSE this run",
         "restart": "RESTART this run from its latest checkpoint"}
