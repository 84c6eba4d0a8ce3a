"""Looking up a run the way every run tool does: the ``run_id`` input field, GET ``/rft/runs/{id}``
with an actionable ``not_found``, and the run's dashboard link.

Source: reference/prime-api.md §2.2 (GET ``/rft/runs/{id}``), §5.1.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import Field

from tools.core._context import Context
from tools.errors import call, fail
from tools.platform import errors as perr
from tools.platform.settings import DEFAULT_BASE_URL, DEFAULT_FRONTEND_URL

if TYPE_CHECKING:  # annotations only: importing this module stays cheap (no httpx)
    from tools.platform import wire

#: The ``run_id`` input field of every run tool.
RUN_ID = Field(min_length=1, max_length=200,
               description="Run id, as shown by mf_list_runs or returned by mf_dispatch_run.")


def not_found(run_id: str) -> Exception:
    """The ``not_found`` ToolFailure for a run id this key cannot see."""
    mine, personal = call("mf_list_runs"), call("mf_list_runs", team="personal")
    return fail("not_found", f"No run {run_id!r} is visible to this API key.",
                f"Check the id with {mine}. Runs belong to the owner that launched them: {personal} lists the "
                "personal account's, and passing a team id lists that team's.", next_calls=[mine, personal])


def require_run(ctx: Context, run_id: str) -> wire.RLRun:
    """GET ``/rft/runs/{id}``; an unknown id becomes ``not_found`` with a fix naming mf_list_runs."""
    try:
        return ctx.platform().get_run(run_id)
    except perr.NotFound as exc:
        if exc.service_code == "not_the_api":  # a wrong base URL, not a wrong run id
            raise
        raise not_found(run_id) from None


@contextlib.contextmanager
def require_run_on_404(ctx: Context, run_id: str) -> Iterator[None]:
    """Around a per-run read (``/rft/runs/{id}/...``): on a 404, GET the run itself, so an id this
    key cannot see becomes ``not_found`` with its fix (:func:`require_run`); a 404 of a run that
    exists propagates unchanged."""
    try:
        yield
    except perr.NotFound:
        require_run(ctx, run_id)
        raise


#: What a result says when it has no dashboard link (see :func:`dashboard_url`).
NO_DASHBOARD = ("null: the API is not Prime Intellect's (PRIME_API_BASE_URL is set) and PRIME_FRONTEND_URL is not, so "
                "the real dashboard would not have this run; the local emulator serves the page at its own URL "
                "(set PRIME_FRONTEND_URL to it)")


def dashboard_url(ctx: Context, run_id: str) -> str | None:
    """The run's page: ``{frontend_url}/dashboard/training/{run_id}``, as ``prime`` prints it.

    None when the link would be dishonest: the API base URL is not the platform's default (the
    local emulator, a staging host) while the frontend URL is still the real dashboard's default,
    which does not have this run. The emulator serves the page at the same path, so with
    ``PRIME_FRONTEND_URL`` set to the emulator's URL the link is its page."""

    settings = ctx.settings
    frontend = settings.frontend_url.rstrip("/")
    if frontend == DEFAULT_FRONTEND_URL and settings.base_url.rstrip("/") != DEFAULT_BASE_URL:
        return None
    return f"{frontend}/dashboard/training/{run_id}"

