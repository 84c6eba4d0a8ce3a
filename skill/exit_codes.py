"""The process exit codes of ``model-factory`` (also in README.md), in one place.

| code | meaning |
|---|---|
| 0 | success |
| 1 | the check did not pass: validate-config found errors (valid false) or judged nothing (null); preflight not ready |
| 2 | usage error (unknown command or option, missing argument, bad or out-of-range value) |
| 3 | the tool returned an error (ToolError on stdout with --json) |
| 4 | a human confirmation is required or was refused/invalid |
| 5 | ambiguous outcome: a launch may have happened; reconcile, never repeat |
| 130 | interrupted (Ctrl-C, SIGINT) |
| 143 | terminated (SIGTERM: 128 + 15), after the same clean-up as Ctrl-C |
| 141 | the reader closed the output pipe early (``... | head -1``): 128 + SIGPIPE, as Unix tools report it |

Imports nothing from ``skill`` (every command module may use it) and nothing heavy.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tools.errors import ErrorCode

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_TOOL_ERROR, EXIT_CONFIRMATION, EXIT_AMBIGUOUS = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130
#: Ended by SIGTERM (``kill``, a supervisor, ``timeout``): 128 + 15, as a shell reports it. The command cleans up as
#: for Ctrl-C first (a download saves its manifest, the demo stops the run it launched on a person's emulator).
EXIT_TERMINATED = 143
#: The reader of stdout (or stderr) went away early: 128 + SIGPIPE (13), what a shell reports for a
#: tool the closed pipe stopped. It says nothing about the command's own outcome.
EXIT_PIPE_CLOSED = 141

#: ToolError codes that mean "a person must approve (again)": exit 4.
CONFIRMATION_CODES: frozenset[ErrorCode] = frozenset({
    "confirmation_required", "confirmation_invalid", "confirmation_expired", "confirmation_used", "plan_changed",
    "approval_refused",
})


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so every clean-up for Ctrl-C runs for it too;
    ``model-factory`` then exits :data:`EXIT_TERMINATED`, not :data:`EXIT_INTERRUPTED`."""


def interrupt_for(signum: int) -> KeyboardInterrupt:
    """The exception a signal handler raises for ``signum``: :class:`Terminated` for SIGTERM, else a plain
    KeyboardInterrupt (SIGINT)."""

    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def exit_code_for(result: Any) -> int:
    """The process exit code for a tool result (see the table above): a check that ran and failed
    (``valid`` false or null, ``ok`` false) is 1, so ``model-factory validate-config X && ...`` stops; a ToolError is
    5 when ambiguous (or an earlier launch of the config is unresolved),
    4 for the confirmation codes, 2 for ``bad_arguments``, else 3."""
    if not getattr(result, "error", False) or not hasattr(result, "code"):
        # valid null (no schema judged the file) is no pass either: `validate-config X && plan-run X` stops
        failed = getattr(result, "valid", True) is not True or getattr(result, "ok", True) is False
        return EXIT_CHECK_FAILED if failed else EXIT_OK
    if result.ambiguous or result.code == "unresolved_launch":  # an earlier launch may have happened
        return EXIT_AMBIGUOUS
    if result.code in CONFIRMATION_CODES:
        return EXIT_CONFIRMATION
    if result.code == "bad_arguments":
        return EXIT_USAGE
    return EXIT_TOOL_ERROR
