"""The local Model Factory emulator: the platform's HTTP API and the traces host on loopback.

It serves the routes ``prime`` 0.18.0 uses (see ``reference/prime-api.md`` §2), with
in-memory accounts and runs on a simulated clock that can run fast, a page per run at the
dashboard's path, scenarios (failure, stall, crash-looping env server, endless queue, a
secret-echo canary, pending and image-pull start-ups, a slow stop, long runs with large
logs, runs with many and large traces) and fault injection (status codes, delays, cut,
truncated, dripping and stalled answers, misbehaving cursors, a create that commits and
then times out). ``README.md`` documents all of it.

Use :class:`EmulatorServer` in-process (tests, the demo) or :func:`serve` in the foreground
(``model-factory emulator``). It imports nothing from ``tools``: it is the other side of
the wire.
"""

from .app import create_app
from .dashboard import DASHBOARD_PATH, dashboard_url
from .faults import KINDS as FAULT_KINDS
from .faults import FaultInjector, FaultRule, Seen, route_path
from .routes_admin import is_loopback
from .scenarios import SCENARIOS
from .scenarios import SUMMARIES as SCENARIO_SUMMARIES
from .seed import (
    DEFAULT_API_KEY,
    DEFAULT_SPEED,
    DEFAULT_USER_ID,
    DEMO_SPEED,
    OTHER_API_KEY,
    OTHER_USER_ID,
    TEAM_EVALS_ID,
    TEAM_RESEARCH_ID,
    Seed,
    default_seed,
)
from .server import ClosedPort, EmulatorServer, closed_port, export_line, local_url, serve
from .simulator import SimRun, Timing, TraceShape
from .state import EmulatorState

__all__ = [
    "DASHBOARD_PATH", "DEFAULT_API_KEY", "DEFAULT_SPEED", "DEFAULT_USER_ID", "DEMO_SPEED", "FAULT_KINDS",
    "OTHER_API_KEY", "OTHER_USER_ID", "SCENARIOS", "SCENARIO_SUMMARIES", "TEAM_EVALS_ID", "TEAM_RESEARCH_ID",
    "ClosedPort", "EmulatorServer", "EmulatorState", "FaultInjector", "FaultRule", "Seed", "Seen", "SimRun",
    "Timing", "TraceShape", "closed_port", "create_app", "dashboard_url", "default_seed", "export_line", "is_loopback",
    "local_url", "route_path", "serve",
]
