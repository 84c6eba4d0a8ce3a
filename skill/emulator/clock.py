"""The simulated clock: wall time times ``speed``, plus manual advances.

Simulated second 0 is the wall time at which the clock was created. Every timestamp the
emulator serves (run times, log lines, metrics, traces, the HTTP ``Date`` header) is on this
clock, so with ``speed > 1`` they run ahead of the wall clock. ``speed = 0`` freezes it
(tests then move it with :meth:`SimClock.advance`).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime


class SimClock:
    """Simulated seconds since creation, running ``speed`` times as fast as the wall clock."""

    def __init__(self, speed: float = 1.0) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0")
        self._lock = threading.Lock()
        self.epoch = time.time()
        self._base_sim = 0.0
        self._base_wall = time.monotonic()
        self._speed = float(speed)

    @property
    def speed(self) -> float:
        """Simulated seconds per wall second."""
        return self._speed

    def now(self) -> float:
        """Current simulated time, in seconds since the clock was created."""
        with self._lock:
            return self._base_sim + (time.monotonic() - self._base_wall) * self._speed

    def set_speed(self, speed: float) -> None:
        """Change the speed from now on (time already elapsed is kept)."""
        if speed < 0:
            raise ValueError("speed must be >= 0")
        with self._lock:
            wall = time.monotonic()
            self._base_sim += (wall - self._base_wall) * self._speed
            self._base_wall = wall
            self._speed = float(speed)

    def advance(self, seconds: float) -> float:
        """Jump ``seconds`` of simulated time ahead; returns the new simulated now."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._base_sim += seconds
        return self.now()

    def to_datetime(self, sim: float) -> datetime:
        """The UTC datetime a simulated time stands for."""
        return datetime.fromtimestamp(self.epoch + sim, tz=UTC)

    def iso(self, sim: float) -> str:
        """ISO 8601 UTC with milliseconds and ``Z`` (``2026-08-20T12:06:01.120Z``)."""
        return self.to_datetime(sim).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    def from_iso(self, text: str) -> float:
        """Simulated time of an ISO datetime (``Z`` or offset accepted); ValueError if unparsable."""
        value = datetime.fromisoformat(text)
        if value.tzinfo is None:  # naive means UTC
            value = value.replace(tzinfo=UTC)
        return value.timestamp() - self.epoch
