"""Time as the platform tells it: timestamps parsed, "now" from the last answer's ``Date``
header, ages in seconds. Ages are never measured against the local clock (skew; the emulator's
fast clock).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    from tools.platform.client import PlatformClient


def parse_time(value: str | datetime | None) -> datetime | None:
    """An ISO timestamp (``Z`` or offset; naive = UTC) as an aware datetime; ``None`` if unparsable."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(value)  # Python >= 3.11 reads a "Z" suffix
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def server_now(platform: PlatformClient) -> datetime:
    """The platform's clock (last ``Date`` header), else the local clock."""
    return platform.server_now() or datetime.now(UTC)


def seconds_since(then: datetime | None, now: datetime) -> float | None:
    """``now - then`` in seconds (one decimal, never below 0), ``None`` when ``then`` is unknown.

    ``now`` is the ``Date`` header, which has whole seconds (RFC 9110 §5.6.7): a record made in the
    same second reads up to a second "ahead" of it. Such an age is 0, never "-1 s ago"."""
    return None if then is None else max(0.0, round((now - then).total_seconds(), 1))
