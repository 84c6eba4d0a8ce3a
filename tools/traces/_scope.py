"""What both trace tools share: the team the traces host is asked for (``X-Prime-Team-ID``), and
its largest page.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from tools.core import RUN_ID, Context, resolve_owner
from tools.platform import errors as perr
from tools.platform import wire

#: Items per page the traces host returns at most (reference/prime-api.md §6).
PAGE_LIMIT = 100


def _one_segment(run_id: str) -> str:
    if "/" in run_id:
        raise ValueError("a run id cannot contain '/': the traces host addresses it as one path segment (use "
                         "the id exactly as the run listing shows it)")
    return run_id


#: The ``run_id`` field of the trace tools: :data:`tools.core.RUN_ID`, refused (``bad_arguments``
#: naming ``run_id``, nothing sent) when it holds a ``/``, which the traces host cannot address.
TRACES_RUN_ID = Annotated[str, AfterValidator(_one_segment), RUN_ID]


def platform_run(ctx: Context, run_id: str) -> tuple[wire.RLRun | None, str | None]:
    """(the platform run or None, the team the traces host should scope to): the run's team,
    else the configured owner's (eval runs exist on the traces host only)."""
    try:
        run = ctx.platform().get_run(run_id)
    except perr.NotFound:
        return None, resolve_owner(ctx).team_id
    return run, run.team_id
