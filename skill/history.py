"""``model-factory history [--run RUN] [--since 1d] [--limit N] [--json]``: the audit trail, for a person.

Every tool call, from every surface (the command line, the MCP server, the demo, the chat helpers),
is recorded in the user's state store by :func:`skill.registry.audit`: when, the surface, the tool,
its arguments with secrets scrubbed, the outcome code, the run and plan, and money a person approved
(the high estimate of a plan launched) or the platform reported spent. This prints them, oldest
first: a table on a terminal (tab-separated when piped), or ``--json``: ``{"store": path, "calls":
[AuditRecord...], "shown": n}``. It is a command for people, not an agent tool: ``mf_list_launches``
is the agent's view of what it launched.

The store keeps at most 20,000 calls and none older than 180 days
(:data:`tools.guardrails.store.AUDIT_MAX_ROWS`, :data:`~tools.guardrails.store.AUDIT_MAX_DAYS`).

Exit codes: 0 printed (also when nothing is recorded), 2 a ``--since`` that is not a time.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timedelta, timezone

from skill.exit_codes import EXIT_OK, EXIT_USAGE
from tools.units import usd

_AGO = re.compile(r"\A(\d+)\s*([mhdw])\Z")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime | None = None) -> datetime | None:
    """``30m`` / ``12h`` / ``1d`` / ``2w`` before ``now``, or an ISO 8601 date or time (UTC unless it
    says otherwise); None when ``text`` is neither."""
    now = now or datetime.now(timezone.utc)
    match = _AGO.match(text.strip().lower())
    if match:
        return now - timedelta(**{_UNITS[match[2]]: int(match[1])})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _money(approved: float | None, spent: float | None) -> str:
    parts = [f"approved {usd(approved)}" if approved is not None else "",
             f"spent {usd(spent)}" if spent is not None else ""]
    return ", ".join(p for p in parts if p)


def _arguments(text: str) -> str:
    """The arguments as ``name=value`` words (the run and plan have columns of their own)."""
    try:
        args = json.loads(text)
    except ValueError:
        return text
    if not isinstance(args, dict):
        return text
    return " ".join(f"{k}={json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v}"
                    for k, v in args.items() if k not in ("run_id", "plan_id") and v not in (None, [], ""))


def main(*, run: str | None = None, since: str | None = None, limit: int = 200, as_json: bool = False) -> int:
    """Print the recorded calls; returns the exit code."""
    from skill import terminal
    from tools.core import Context
    from tools.errors import ToolFailure
    from tools.guardrails.records import iso

    start = None
    if since is not None:
        start = parse_since(since)
        if start is None:
            print("model-factory history: --since takes 30m, 12h, 1d, 2w, or a date or time such as 2026-12-01 or "
                  "2026-12-01T10:00 (UTC).", file=sys.stderr)
            return EXIT_USAGE
    ctx = Context.from_environment()
    try:
        store = ctx.store()
        try:
            calls = store.audit(run_id=run, since=iso(start) if start else None, limit=max(1, limit))
        except ToolFailure as failure:
            print(f"Cannot read the audit trail: {failure.error.message}\nFix: {failure.error.fix}", file=sys.stderr)
            return EXIT_OK if failure.error.code == "state_read_only" else 3
        if as_json:
            print(json.dumps({"store": str(store.path), "shown": len(calls),
                              "calls": [c.model_dump() for c in calls]}, indent=2))
            return EXIT_OK
        err, out = terminal.stderr(), terminal.stdout()
        what = (f" about run {run}" if run else "") + (f" since {iso(start)}" if start else "")
        if not calls:
            for line in terminal.wrap(f"No calls recorded{what} in {store.path}.", err.width):
                err.print(line)
            return EXIT_OK
        rows = [[c.at[:19] + "Z", c.tool.removeprefix("mf_").replace("_", "-"),
                 ", ".join(p for p in (c.outcome, _money(c.usd_approved, c.usd_spent)) if p),
                 c.run_id or c.plan_id or "", _arguments(c.arguments), c.surface] for c in calls]
        lines, dropped = terminal.table(["time", "call", "outcome", "run_or_plan", "arguments", "surface"], rows, out,
                                        keep=3)
        left_out = f"; left out at this width: {', '.join(dropped)} (--json has every field)" if dropped else ""
        opening = (f"{len(calls)} call{'s' if len(calls) != 1 else ''}{what}, oldest first, from {store.path}"
                   + (f" (the newest {limit}; --limit for more)" if len(calls) == limit else "") + f"{left_out}.")
        for line in terminal.wrap(opening, err.width):
            err.print(line)
        for line in lines:
            out.print(line)
        return EXIT_OK
    finally:
        ctx.close()
