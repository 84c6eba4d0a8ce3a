"""Opening a volume's storage for reading, the way every volume tool does: a transfer route (POST
``/training/volumes/{name}/transfer``, prime 0.18.0 ``route_volume_transfer``), its credentials in a
:class:`~tools.platform.storage.VolumeReader`, and each refusal turned into an error that says what to do.

- 404: the owner has no such volume (``volume_not_found``), or the platform has no direct route (an older
  backend: ``transfer_unavailable``, copy with ``prime volumes get``, which falls back to an SSH session, as
  ``commands/volumes.py`` ``_transfer`` does on NotFoundError). Told apart by listing the owner's volumes.
- ``via: "session"`` (the caller has a live read-write session on the volume): ``transfer_unavailable``,
  naming the session to stop.
- 403: ``forbidden`` (another team's volume); 409: ``conflict`` (busy, or still being created).

The route's two credential values are added to the context's scrubber, so no result or error shows them.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from tools.core._context import Context
from tools.errors import call, fail
from tools.platform import errors as perr

if TYPE_CHECKING:  # annotations only: importing this module stays cheap
    from tools.platform.storage import VolumeReader


def prime_command(args: list[str], team_id: str | None) -> str:
    """A ``prime`` command for a person, with the team it must act for (``PRIME_TEAM_ID=...`` in front)."""
    text = shlex.join(["prime", *args])
    return f"PRIME_TEAM_ID={shlex.quote(team_id)} {text}" if team_id else text


def open_volume(ctx: Context, volume: str, team_id: str | None, *, path: str = "",
                connections: int = 16) -> VolumeReader:
    """A reader of ``volume`` (the owner ``team_id``; None = personal), its route asked for ``path``.

    Raises ToolFailure: ``volume_not_found``, ``transfer_unavailable``, ``forbidden``, ``conflict``, and the
    platform codes of the route call."""
    from tools.platform.storage import VolumeReader

    platform = ctx.platform()
    session: dict | None = None

    def route():  # noqa: ANN202 - (route, server time), VolumeReader's route callback
        nonlocal session
        answer = platform.route_volume_transfer(volume, path=path, team_id=team_id)
        for secret in (answer.secret_access_key, answer.session_token):
            if secret is not None:
                ctx.scrubber.add("volume transfer credential", secret.get_secret_value())
        session = answer.session
        return answer, platform.server_now()

    get = prime_command(["volumes", "get", volume, path or "/", "."], team_id)
    try:
        return VolumeReader(route, clock=ctx.clock, connections=connections,
                            read_seconds=ctx.http_timeouts().read_seconds,
                            connect_seconds=ctx.http_timeouts().connect_seconds)
    except perr.NotFound as exc:
        if exc.service_code == "not_the_api":
            raise
        names = {v.name for v in platform.list_volumes(team_id=team_id)}
        if volume not in names:
            listing = call("mf_list_volumes", team=team_id or "personal")
            raise fail("volume_not_found", f"Volume {volume!r} is not one of {_owner(team_id)}'s volumes (deleted, "
                       "or another team's).", f"Check the name with {listing}.", next_calls=[listing]) from None
        raise fail("transfer_unavailable", f"This platform has no direct storage route for volume {volume!r} "
                   "(POST /training/volumes/{name}/transfer answered 404): its files can only be copied through "
                   "an SSH session.",
                   f"Copy it with `{get}` (needs the prime CLI), which uses a session.") from None
    except perr.Conflict as exc:
        if exc.service_code == "via_session":
            sid = (session or {}).get("id") or "SESSION_ID"
            stop = prime_command(["volumes", "stop", volume, str(sid)], team_id)
            raise fail("transfer_unavailable", f"You have a live read-write session on volume {volume!r} "
                       f"(session {sid}): the platform routes reads through it (SSH), not straight to storage.",
                       f"Stop the session with `{stop}` (needs the prime CLI) and call again, or copy through it "
                       f"with `{get}`.") from None
        raise fail("conflict", f"Volume {volume!r} cannot be read now: {exc.message}",
                   "Wait until the volume is created and no upload or read-write session holds it, then call "
                   "again.", retryable=True) from None
    except perr.Forbidden as exc:
        teams = call("mf_list_teams")
        raise fail("forbidden", f"This API key cannot read volume {volume!r} of {_owner(team_id)}: {exc.message}",
                   f"Use a key of a member of that team; {teams} lists the key's teams.",
                   next_calls=[teams]) from None


def _owner(team_id: str | None) -> str:
    return f"team {team_id}" if team_id else "the personal account"
