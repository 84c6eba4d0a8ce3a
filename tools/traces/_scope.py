"""What both trace tools share: the team the traces host is asked for (``X-Prime-Team-ID``), and
its largest page.
"""

from __future__ import annotations

from tools.core import Context, resolve_owner
from tools.platform import errors as perr
from tools.platform import wire

#: Items per page the traces host returns at most (reference/prime-api.md §6).
PAGE_LIMIT = 100


def platform_run(ctx: Context, run_id: str) -> tuple[wire.RLRun | None, str | None]:
    """(the platform run or None, the team the traces host should scope to): the run's team,
    else the configured owner's (eval runs exist on the traces host only)."""
    try:
        run = ctx.platform().get_run(run_id)
    except perr.NotFound:
        return None, resolve_owner(ctx).team_id
    return run, run.team_id
