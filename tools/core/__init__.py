"""What every tool shares: the :class:`Context` a call runs with, the :func:`tool` decorator,
the output budget, run lookups (and the runs a resumed run continues), owner resolution, and how a
person's shell runs this program.

This is the layer that applies the guardrails to every call: the context's scrubber (built from
:mod:`tools.guardrails.scrubbing`) cleans every result, error and progress message and every
platform answer on arrival, and :func:`tool` refuses arguments holding a secret-looking value
before the body runs. So ``tools.core`` sits above ``tools.guardrails`` (pure local checks over
plain values, which only need the error shape of :mod:`tools.errors`) and below the phase
packages. The definitions live in private modules; import them from here.
"""

from tools.core._alerts import alert_calls, alert_words, alerts_of_run
from tools.core._budget import OUTPUT_BUDGET_CHARS, fit_largest, json_chars
from tools.core._command import PROGRAM, console_script, program, quote, shell_command
from tools.core._context import STATE_DIR_ENV, Approver, Context, ProgressCallback, tool
from tools.core._limits import INT64_MAX, MAX_SECONDS_PER_STEP, MAX_STEPS
from tools.core._lineage import Predecessor, first_step, predecessors
from tools.core._owner import PERSONAL, Owner, owner_label, resolve_owner
from tools.core._runs import (
    NO_DASHBOARD,
    RUN_ID,
    dashboard_url,
    not_found,
    require_run,
    require_run_on_404,
)
from tools.core._volumes import open_volume, prime_command

__all__ = [
    "Approver",
    "Context",
    "INT64_MAX",
    "MAX_SECONDS_PER_STEP",
    "MAX_STEPS",
    "NO_DASHBOARD",
    "OUTPUT_BUDGET_CHARS",
    "Owner",
    "PERSONAL",
    "PROGRAM",
    "Predecessor",
    "ProgressCallback",
    "RUN_ID",
    "STATE_DIR_ENV",
    "alert_calls",
    "alert_words",
    "alerts_of_run",
    "console_script",
    "dashboard_url",
    "first_step",
    "fit_largest",
    "json_chars",
    "not_found",
    "open_volume",
    "owner_label",
    "predecessors",
    "prime_command",
    "program",
    "quote",
    "require_run",
    "require_run_on_404",
    "resolve_owner",
    "shell_command",
    "tool",
]
