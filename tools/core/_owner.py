"""Who a request acts for: a team or the personal account, and where that came from.

The precedence is the ``prime`` CLI's (reference/prime-api.md §1.2): an explicit argument,
then ``PRIME_TEAM_ID`` (non-blank), then the active context / ``~/.prime/config.json``
``team_id``, else the personal account. For a launch (``strict=True``) "nothing configured"
is not good enough when the account belongs to teams: the owner is ambiguous and planning
stops until the user names one (guardrail 5 of DESIGN.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools.core._context import Context
from tools.errors import Call, call, fail
from tools.platform.settings import looks_like_team_id

PERSONAL = "personal"

_SOURCES = {
    "env": "PRIME_TEAM_ID",
    "config": "~/.prime/config.json team_id",
    "context": "the active prime context",
}


class Owner(BaseModel):
    """The owner of a run or request.

    ``team_id`` is ``None`` for the personal account. ``source`` says where the choice came
    from (``argument``, ``PRIME_TEAM_ID``, ``~/.prime/config.json team_id``, ``the active
    prime context``, ``default``); ``note`` flags anything a person should notice, such as
    ``PRIME_TEAM_ID`` overriding a different saved team.
    """

    kind: Literal["team", "personal"] = Field(description="team or personal.")
    team_id: str | None = Field(default=None, description="Team id (CUID, c + 24 chars), null for personal.")
    team_name: str | None = Field(default=None, description="Team name when known (GET /user/teams).")
    source: str = Field(description="Where the choice came from.")
    note: str | None = Field(default=None, description="Something a person should notice about this owner.")

    @property
    def label(self) -> str:
        """``team <name> (<id>)`` or ``personal account``."""
        if self.kind == PERSONAL:
            return owner_label(None)
        return f"team {self.team_name} ({self.team_id})" if self.team_name else owner_label(self.team_id)


def owner_label(team_id: str | None) -> str:
    """``team <id>`` for a team id (e.g. a run's ``teamId``), ``personal account`` for ``None``."""
    return f"team {team_id}" if team_id else "personal account"


def _team_name(ctx: Context, team_id: str) -> str | None:
    settings = ctx.settings
    if settings.team_name and settings.team_id == team_id:
        return settings.team_name
    return next((t.name for t in ctx.platform().list_all_teams() if t.team_id == team_id), None)


def resolve_owner(ctx: Context, requested: str | None = None, *, strict: bool = False,
                  retry: Call | None = None) -> Owner:
    """Resolve the owner for a request.

    Args:
        requested: ``"personal"``, a team id, or ``None`` to use the configured owner.
        strict: for launches: verify an explicit team against GET ``/user/teams`` and stop
            with ``owner_ambiguous`` when nothing is configured but the account has teams.
        retry: the call being made; ``owner_ambiguous`` then names it again with each possible
            team (personal and the first teams) in ``next_calls``.

    Raises:

        ToolFailure: ``invalid_team`` (malformed id, or not a member), ``owner_ambiguous``.
        PlatformError: from GET ``/user/teams`` (strict mode only).
    """
    if requested is not None and requested.strip().lower() == PERSONAL:
        return Owner(kind=PERSONAL, source="argument")
    if requested:
        team_id = requested.strip()
        if not looks_like_team_id(team_id):
            # The value is not repeated: a mistyped argument may be a pasted key.
            listing = call("mf_list_teams")
            raise fail("invalid_team", "The team argument is not a team id (c followed by 24 lowercase letters/digits) "
                       "nor 'personal' (value not shown).",
                       f"Pass one of the team ids {listing} lists, or personal.", next_calls=[listing])
        if strict:
            by_id = {t.team_id: t for t in ctx.platform().list_all_teams()}
            if team_id not in by_id:
                listing = call("mf_list_teams")
                raise fail("invalid_team", f"This API key is not a member of team {team_id}.",
                           f"Pass one of the team ids {listing} lists, or personal.", next_calls=[listing])
            return Owner(kind="team", team_id=team_id, team_name=by_id[team_id].name, source="argument")
        return Owner(kind="team", team_id=team_id, source="argument")

    settings = ctx.settings
    if settings.team_id:
        note = None
        if settings.team_id_source == "env" and settings.saved_team_id and settings.saved_team_id != settings.team_id:
            note = f"PRIME_TEAM_ID overrides the saved team {settings.saved_team_id}."
        name = _team_name(ctx, settings.team_id) if strict else settings.team_name
        return Owner(kind="team", team_id=settings.team_id, team_name=name,
                     source=_SOURCES.get(settings.team_id_source, settings.team_id_source), note=note)
    if strict:
        teams = ctx.platform().list_all_teams()
        if teams:
            options = ", ".join(f"{t.team_id} ({t.name})" for t in teams[:10])
            owners = [PERSONAL, *(t.team_id for t in teams[:2])]
            calls = [Call(tool=retry.tool, arguments={**retry.arguments, "team": o}) for o in owners] if retry else []
            fix = ("Ask the user which owner should pay, then call again with the team set to personal or a team id "
                   "(or set PRIME_TEAM_ID)")
            raise fail(
                "owner_ambiguous",
                f"No team is configured and this account belongs to {len(teams)} team(s): {options}. "
                "A run would be billed to the personal account by default; say which owner pays.",
                fix + (": " + " or ".join(map(str, calls)) + "." if calls else "."), next_calls=calls,
            )

    return Owner(kind=PERSONAL, source="default")
