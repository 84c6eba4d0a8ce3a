"""``model-factory approve PLAN_ID``: a person approves one plan at an interactive terminal.

The command refuses (exit code 4), before reading the plan:

* under ``--json`` (machine-readable output means no person is reading);
* under an agent host's shell (:data:`AGENT_MARKERS`: the variables Claude Code, Codex, Cursor and
  opencode set in the shells they run for the agent): an agent cannot approve its own plan; the
  message names the variable and the path a person uses instead (their own terminal, or the host's
  approval prompt, which the MCP server asks through);
* unless stdin and stdout are both a terminal and the process has a controlling terminal
  (``/dev/tty`` opens): a pipe, a redirect or a detached process means no person is at it.

It needs only the state store (per user: ``~/.local/state/model-factory``, or
``$MODEL_FACTORY_STATE_DIR``): no API key, no platform settings, no forwarded secrets. It prints
the plan summary recorded at planning, checks what it can locally (the plan is not already sent,
not older than 24 hours, not imported from an old ledger, and the config file's bytes still hash to
the planned sha256), and asks the person to type a check word: :data:`CHALLENGE_LENGTH` letters
drawn at random for this approval (:data:`CHALLENGE_LETTERS`, none of them a hex digit, so no plan
id, hash or anything else a tool returns spells it), written to and read from the controlling
terminal only (three tries: a typo is not a refusal). Only then does it mint a confirmation code
``mfc_...`` (valid 15 minutes, works once) bound to the recorded plan hash, recorded as channel
``terminal``, checked ``terminal, same user``, to paste to the agent. ``mf_dispatch_run``
recomputes the whole plan in the agent's process (config, env files, owner, prices, secret names)
and refuses with ``plan_changed``, naming what moved, if it no longer matches what was approved.

What this stops and what it does not: an honest agent, an agent's shell marked by its host, a
pipe, and a challenge guessed from what the tools return. A process of the same user outside any
sandbox can still drive a pseudo-terminal, clear the variables and read the word off it; the host's
approval prompt (MCP elicitation) is the stronger channel where there is one.

Exit codes: 0 approved (code printed), 3 the plan cannot be approved (unknown, already
launched, an earlier launch of the same config unresolved and not acknowledged by this plan, too old,
config file missing), 4 refused / not approved / plan changed, 130 interrupted.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from skill.exit_codes import EXIT_CONFIRMATION, EXIT_OK, EXIT_TOOL_ERROR

#: How many times the person may type the check word.
TRIES = 3
#: The check word: this many letters, each drawn with :mod:`secrets` from :data:`CHALLENGE_LETTERS`.
CHALLENGE_LENGTH = 5
#: No hex digit (a-f) and no letter easily misread (i, l, o): a plan id's characters never spell it.
CHALLENGE_LETTERS = "ghjkmnpqrstuvwxyz"
#: The variables an agent host sets in the shell it runs for the agent: (variable, host, the value it
#: has there, None: any non-empty value). Sources: Claude Code sets CLAUDECODE=1 in the shells of its
#: Bash tool since 0.2.47 (anthropics/claude-code issue 531); Codex sets CODEX_SANDBOX (seatbelt, macOS) and
#: CODEX_SANDBOX_NETWORK_DISABLED=1 for its shell tool (openai/codex AGENTS.md and core/src/spawn.rs),
#: and CODEX_CI / CODEX_THREAD_ID in its commands' environment (openai/codex issue 22124); Cursor sets
#: CURSOR_AGENT=1 in agent terminals (cursor.com/docs/agent/terminal) and
#: CURSOR_EXTENSION_HOST_ROLE=agent-exec in the IDE agent's shells (vercel/vercel pull 15879);
#: opencode sets OPENCODE=1 (anomalyco/opencode issue 1775, packages/opencode/src/index.ts).
AGENT_MARKERS: tuple[tuple[str, str, str | None], ...] = (
    ("CLAUDECODE", "Claude Code", None),
    ("CODEX_SANDBOX", "Codex", None),
    ("CODEX_SANDBOX_NETWORK_DISABLED", "Codex", None),
    ("CODEX_CI", "Codex", None),
    ("CODEX_THREAD_ID", "Codex", None),
    ("CURSOR_AGENT", "Cursor", None),
    ("CURSOR_EXTENSION_HOST_ROLE", "Cursor", "agent-exec"),
    ("OPENCODE", "opencode", "1"),
)
_REFUSED_CODES = frozenset({"plan_changed", "confirmation_required", "approval_refused"})


def agent_marker(env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(variable, host)`` of the first agent-host marker set in ``env`` (:data:`AGENT_MARKERS`), or None."""
    for name, host, value in AGENT_MARKERS:
        found = env.get(name, "").strip()
        if found and (value is None or found == value):
            return name, host
    return None


def new_challenge() -> str:
    """A fresh check word: :data:`CHALLENGE_LENGTH` letters of :data:`CHALLENGE_LETTERS`, at random."""
    return "".join(secrets.choice(CHALLENGE_LETTERS) for _ in range(CHALLENGE_LENGTH))


def _say(text: str, stream: TextIO | None = None) -> None:
    """``text`` for the person, wrapped to their terminal's width: at spaces only, each command
    on a line of its own, bare, so it pastes whole (see :mod:`skill.terminal`)."""
    from skill import terminal

    term = terminal.Terminal.of(stream or sys.stdout)
    for line in terminal.wrap(text, term.width, commands=True):
        term.print(line)


class _Tty:
    """The controlling terminal (``/dev/tty``): :meth:`ask` writes a question there and reads the line typed
    there (:func:`skill.terminal.ask`: Ctrl-C or SIGTERM always ends the wait)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._out = open(os.dup(fd), "w", encoding="utf-8", errors="replace", closefd=True)  # noqa: SIM115

    def ask(self, question: str) -> str | None:
        """``question`` on the terminal, then the line typed (None at the end of input)."""
        from skill import terminal

        return terminal.ask(question, fd=self._fd, out=self._out)

    def __enter__(self) -> _Tty:
        return self

    def __exit__(self, *exc: object) -> None:
        self._out.close()
        os.close(self._fd)


def _controlling_terminal() -> _Tty | None:
    """The controlling terminal, open for reading and writing (None: the process has none)."""
    try:
        return _Tty(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return None


def _audit(plan_id: str, outcome: str, ctx: Any = None, usd_approved: float | None = None) -> None:
    """Record an approval attempt in the audit trail (surface ``terminal``, tool ``approve``): ``outcome`` is
    ``approved``, ``wrong_check_word``, ``not_approved`` (end of input), ``interrupted``, a refusal
    (``refused_agent_shell``, ``refused_no_terminal``, ``refused_json``) or an error code. The check word
    and the code minted are never recorded. A store that cannot be written records nothing."""
    import json

    from tools.core import Context
    from tools.errors import ToolFailure
    from tools.guardrails.records import AuditRecord, iso, utc_now
    from tools.guardrails.text import shown

    own = ctx is None
    try:
        ctx = ctx or Context.from_environment()
        ctx.store().add_audit(AuditRecord(
            at=iso(utc_now()), surface="terminal", tool="approve", arguments=json.dumps({"plan_id": shown(plan_id)}),
            outcome=outcome, plan_id=shown(plan_id), usd_approved=usd_approved, platform_url=ctx.settings.base_url))
    except (ToolFailure, OSError, ValueError):
        return
    finally:
        if own and ctx is not None:
            ctx.close()


def approve_at_terminal(plan_id: str, *, as_json: bool = False) -> int:
    """Run the terminal approval for ``plan_id``; returns the process exit code."""
    from tools.core import shell_command

    yourself = shell_command(["approve", plan_id])
    if as_json:
        _say("Refused: approving a plan needs a person at an interactive terminal; --json output is not "
             f"accepted. Run `{yourself}` yourself, without --json.", sys.stderr)
        _audit(plan_id, "refused_json")
        return EXIT_CONFIRMATION
    if marker := agent_marker(os.environ):
        _say(f"Refused: this shell belongs to an agent ({marker[1]} set {marker[0]} in it), and an agent cannot "
             f"approve plans. Run `{yourself}` in a terminal of your own, outside the agent (a new terminal window, "
             "not one the agent started), or approve in the host's own prompt (the model-factory MCP server asks "
             "there).", sys.stderr)
        _audit(plan_id, "refused_agent_shell")
        return EXIT_CONFIRMATION
    tty = _controlling_terminal() if sys.stdin.isatty() and sys.stdout.isatty() else None
    if tty is None:
        _say("Refused: `model-factory approve` must be run by a person in an interactive terminal (stdin and "
             "stdout a terminal, and a controlling terminal to ask on). Agents cannot approve plans.", sys.stderr)
        _audit(plan_id, "refused_no_terminal")
        return EXIT_CONFIRMATION
    with tty:
        return _approve(plan_id, tty)


def _approve(plan_id: str, tty: _Tty) -> int:
    from skill import terminal
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
            hint = ("\nPlans live in the state store of the user and state folder that made them: run this as that "
                    "user, with MODEL_FACTORY_STATE_DIR set as the agent's message says if it names one."
                    ) if err.code == "unknown_plan" else ""
            from skill.render import for_people  # the fix names tools; a person reads commands

            fix = for_people(err.fix, err.next_calls)
            _say(f"Cannot approve {shown(plan_id)}: [{err.code}] {shown(err.message)}\nFix: {fix}{hint}", sys.stderr)
            _audit(plan_id, err.code, ctx)
            return EXIT_CONFIRMATION if err.code in _REFUSED_CODES else EXIT_TOOL_ERROR

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
        challenge = new_challenge()  # shown on the controlling terminal only, never in any output a tool returns
        for attempt in range(1, TRIES + 1):
            question = terminal.wrap(f"To {_WHAT[request.action]}, type the letters {challenge}:",
                                     terminal.stdout().width)
            try:
                answer = tty.ask("\n".join(question) + " ")
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the message that follows starts on a line of its own
                print(flush=True)
                _audit(plan_id, "interrupted", ctx)
                raise
            answer = answer.strip() if answer is not None else None
            if answer == challenge:
                break
            if answer is None or attempt == TRIES:
                if answer is None:  # Ctrl-D: the prompt's line is ended first
                    print(flush=True)
                again = "" if answer is None else f" To try again, run `{_approve_again(plan_id, ctx)}`."
                _audit(plan_id, "not_approved" if answer is None else "wrong_check_word", ctx)
                _say(f"Not approved; nothing was done.{again}")
                return EXIT_CONFIRMATION
            _say(f"That is not {challenge} ({TRIES - attempt} more {'try' if TRIES - attempt == 1 else 'tries'}; "
                 "Ctrl-C to stop).")
        try:
            token = approve_plan(plan_id, "terminal", ctx, plan_hash=request.plan_hash)
        except ToolFailure as failure:
            err = ctx.scrubber.scrub_model(failure.error)
            from skill.render import for_people

            _say(f"Not approved: [{err.code}] {shown(err.message)}\nFix: {for_people(err.fix, err.next_calls)}",
                 sys.stderr)
            _audit(plan_id, err.code, ctx)
            return EXIT_CONFIRMATION if err.code in _REFUSED_CODES else EXIT_TOOL_ERROR
        _audit(plan_id, "approved", ctx, usd_approved=request.usd_high if request.action != "stop" else None)
        _say(f"Approved. Confirmation code (valid {request.ttl_seconds // 60} minutes, works once):")
        from skill import terminal

        print(f"\n{terminal.fit_alone('  ' + token, terminal.stdout().width)}\n", flush=True)  # whole at any width
        _say("Paste it to the agent that asked for this approval, or run this yourself (in a shell with the agent's "
             f"Model Factory settings and secrets): `{_carry_out(request, token, ctx)}`")
        return EXIT_OK
    finally:
        ctx.close()


def _approve_again(plan_id: str, ctx: Any) -> str:
    """The approve command again, naming the state folder when it is not the default one."""
    from tools.core import shell_command

    return shell_command(["approve", plan_id], assignments=ctx.state_assignments())


def _carry_out(request: Any, token: str, ctx: Any) -> str:
    """The command that carries the approved plan out: dispatch (launch), or the control command
    (resume, stop, pause, restart) of the run, with the code (and the state folder, when it is not
    the default one)."""
    from tools.core import shell_command

    state = ctx.state_assignments()
    if request.action == "launch":
        return shell_command(["dispatch-run", request.plan_id, "--confirmation", token], assignments=state)
    return shell_command([f"{request.action}-run", str(request.run_id), "--confirmation", token], assignments=state)


#: What the person is asked to approve, by plan action.
_WHAT = {"launch": "LAUNCH this run (it spends money)",
         "resume": "RESUME this run as a NEW run (it spends money)",
         "stop": "STOP this run (irreversible)",
         "pause": "PAUSE this run",
         "restart": "RESTART this run from its latest checkpoint"}
