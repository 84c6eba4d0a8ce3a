"""Valid arguments and preconditions for every registry tool: a :class:`Stage` (a fresh emulator
world and folders) and :data:`SETUPS`, one set-up per tool, keyed by its ``mf_`` name.

A tool's arguments come from its input model (every optional field left to its default) plus
what its set-up returns (required fields, and values that make the call meaningful: a run in
the right state, an approved plan, a new dest folder). :func:`arguments` refuses a tool that
has no set-up, or whose set-up leaves a required field out, so a tool added to the registry
cannot be skipped by the fault matrix or the fuzzing: add its line to :data:`SETUPS`.

Used by ``benchmarks/fault_matrix.py`` and the tests (fault matrix, fuzzing).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skill import registry
from skill.emulator import TEAM_RESEARCH_ID, EmulatorServer, Timing
from tools.configs import EXAMPLES_DIR
from tools.core import Context
from tools.errors import ToolError
from tools.launch import approve_plan
from tools.platform import Timeouts, wire

#: HTTP timeouts of the calls under test: a held answer fails in half a second.
FAST_TIMEOUTS = Timeouts(read_seconds=0.5, connect_seconds=0.5, create_seconds=0.5, traces_seconds=0.5)
#: The example every run and plan of a stage is made from (RL, 20 steps).
EXAMPLE = "basic/reverse-text/rl"
#: Fake secret values in every stage's environment: no output may ever show them.
FAKE_SECRETS = {"WANDB_API_KEY": "wandb_v1_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE00",
                "HF_TOKEN": "hf_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE"}


class InstantTime:
    """Time of the calls under test (``Context(clock=t.clock, sleep=t.sleep)``): a wait returns at
    once and moves this clock by what was asked, so polls, back-off and ``Retry-After`` take no
    wall time and time-bounded tools still end by their own bound."""

    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


class SetupError(Exception):
    """A tool has no set-up, or its set-up does not give a working call: the harness fails."""


@dataclass
class Stage:
    """One emulator world, reset, on a frozen clock, with fresh folders under ``root``:
    ``home``, ``state`` (the ledger) and ``project`` (the working folder). Set-ups call its
    helpers; :meth:`context` builds the contexts calls run with."""

    emu: EmulatorServer
    root: Path
    env_extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for sub in ("home", "state", "project"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.emu.faults.clear()
        self.emu.state.reset()
        self.emu.state.set_speed(0)
        self.setup_ctx = self.context(fast=False)
        self._names = 0

    # -- contexts ---------------------------------------------------------------------------
    def env(self, *, base_url: str | None = None, traces_url: str | None = None) -> dict[str, str]:
        """The environment of a call: the emulator's URLs (or the ones given), its key, the fake
        secrets, no ``PATH`` (so no local ``prime`` or ``uv`` is found)."""
        return {"PRIME_API_KEY": self.emu.api_key, "PRIME_API_BASE_URL": base_url or self.emu.base_url,
                "PRIME_TRACES_URL": traces_url or self.emu.base_url, "PRIME_DISABLE_VERSION_CHECK": "1",
                "HOME": str(self.root / "home"), **FAKE_SECRETS, **self.env_extra}

    def context(self, *, fast: bool = True, timeouts: Timeouts = FAST_TIMEOUTS, **urls: str | None) -> Context:
        """A Context on this stage's folders. ``fast``: ``timeouts`` and :class:`InstantTime` (no call
        waits in wall time); else the defaults of a real session."""
        time = InstantTime()
        extra: dict[str, Any] = {"timeouts": timeouts, "clock": time.clock, "sleep": time.sleep} if fast else {}
        return Context(env=self.env(**urls), home=self.root / "home", state_dir=self.root / "state",
                       cwd=self.root / "project", **extra)

    def close(self) -> None:
        self.setup_ctx.close()

    # -- helpers for set-ups ----------------------------------------------------------------
    def path(self, suffix: str = "") -> str:
        """A new path in the project folder (nothing there yet), ending in ``suffix``."""
        self._names += 1
        return str(self.root / "project" / f"out-{self._names}{suffix}")

    def config(self, example: str = EXAMPLE) -> str:
        """A bundled example copied into the project folder; its path."""
        dest = self.root / "project" / (example.replace("/", "-") + ".toml")
        shutil.copy(EXAMPLES_DIR / f"{example}.toml", dest)
        return str(dest)

    def run(self, step: int = 3, ckpt_interval: int | None = None) -> str:
        """A RUNNING run of :data:`EXAMPLE` at ``step`` (metrics, logs, checkpoints, traces); ``ckpt_interval``
        sets ``[ckpt] interval`` (a READY checkpoint before ``step``, which a restart needs)."""
        import tomllib

        config = tomllib.loads((EXAMPLES_DIR / f"{EXAMPLE}.toml").read_text())
        if ckpt_interval is not None:
            config.setdefault("ckpt", {})["interval"] = ckpt_interval
        body = wire.build_create_body(config, name=f"proof-{self._names}")
        run_id = self.setup_ctx.platform().create_run(body).run_id
        t = Timing()
        self.emu.state.advance(t.queue_seconds + t.startup_seconds + t.step_seconds * step + 1)
        return run_id

    def volume_run(self) -> str:
        """A COMPLETED run of :data:`EXAMPLE` on the research team's volume, its checkpoint synced there."""
        import tomllib

        config = tomllib.loads((EXAMPLES_DIR / f"{EXAMPLE}.toml").read_text())
        body = wire.build_create_body(config, name=f"proof-{self._names}", team_id=TEAM_RESEARCH_ID,
                                      volume="research-data")
        run_id = self.setup_ctx.platform().create_run(body).run_id
        t = Timing()
        self.emu.state.advance(t.queue_seconds + t.startup_seconds + t.step_seconds * 20 + t.finalize_seconds
                               + t.checkpoint_upload_seconds + t.volume_sync_seconds + 1)
        return run_id

    def checkpointed_run(self) -> str:
        """A RUNNING run at step 3 with a READY checkpoint at step 2 (what a restart goes back to)."""
        return self.run(ckpt_interval=2)

    def paused_run(self) -> str:
        """A PAUSED run (paused at step 3)."""
        run_id = self.run()
        self.setup_ctx.platform().pause_run(run_id)
        self.emu.state.advance(Timing().pause_seconds + 1)
        return run_id

    def plan(self, **arguments: Any) -> BaseModel:
        """A plan of :data:`EXAMPLE` for the personal account (``mf_plan_run``)."""
        return ok(self.setup_ctx, "mf_plan_run", {"config_path": self.config(), "team": "personal", **arguments})

    def approved_plan(self) -> tuple[str, str]:
        """(plan id, confirmation) of a plan a person approved at the terminal."""
        plan_id = self.plan().plan_id  # type: ignore[attr-defined]
        return plan_id, approve_plan(plan_id, "terminal", self.setup_ctx)

    def confirmation(self, tool: str, arguments: dict[str, Any]) -> str:
        """The confirmation a person gives at the terminal for a gated call (``mf_stop_run``, ...):
        the call without one names its plan (``confirmation_required``), which is approved."""
        result = registry.call_tool(tool, arguments, self.setup_ctx)
        if not isinstance(result, ToolError) or result.code != "confirmation_required":
            raise SetupError(f"{tool} without a confirmation gave {getattr(result, 'code', 'a result')}, "
                             "not confirmation_required")
        match = re.search(r"plan (\S+) needs a person's confirmation", result.message)
        if match is None:
            raise SetupError(f"{tool}'s confirmation_required names no plan: {result.message}")
        return approve_plan(match.group(1), "terminal", self.setup_ctx)


def ok(ctx: Context, tool: str, arguments: dict[str, Any]) -> BaseModel:
    """``tool`` called through the registry; :class:`SetupError` unless it gives a result."""
    result = registry.call_tool(tool, arguments, ctx)
    if isinstance(result, ToolError):
        raise SetupError(f"{tool} in a set-up: {result.code}: {result.message}")
    return result


def _stop(s: Stage) -> dict[str, Any]:
    run_id = s.run()
    return {"run_id": run_id, "timeout_seconds": 10, "confirmation": s.confirmation("mf_stop_run", {"run_id": run_id})}


def _control(tool: str, run: Callable[[Stage], str]) -> Callable[[Stage], dict[str, Any]]:
    """The set-up of a gated control call: a run in the state it acts on, and a person's confirmation."""
    def setup(s: Stage) -> dict[str, Any]:
        run_id = run(s)
        return {"run_id": run_id, "confirmation": s.confirmation(tool, {"run_id": run_id})}
    return setup


def _dispatch(s: Stage) -> dict[str, Any]:
    plan_id, token = s.approved_plan()
    return {"plan_id": plan_id, "confirmation": token}


def _launches(s: Stage) -> dict[str, Any]:
    s.plan()
    return {}


#: One set-up per registry tool: ``stage -> arguments`` (the fields its input model cannot default,
#: and the values that put the call where it does real work). Bounded time arguments keep calls
#: short; the contexts' InstantTime makes every wait instant anyway.
SETUPS: dict[str, Callable[[Stage], dict[str, Any]]] = {
    "mf_preflight": lambda s: {"timeout_seconds": 5},
    "mf_list_examples": lambda s: {},
    "mf_prepare_config": lambda s: {"example": EXAMPLE, "dest": s.path(".toml")},
    "mf_validate_config": lambda s: {"config_path": s.config()},
    "mf_list_models": lambda s: {"team": TEAM_RESEARCH_ID},
    "mf_list_gpus": lambda s: {"team": TEAM_RESEARCH_ID},
    "mf_list_volumes": lambda s: {"team": TEAM_RESEARCH_ID},
    "mf_download_checkpoint": lambda s: {"run_id": s.volume_run(), "dest": s.path()},
    "mf_list_teams": lambda s: {},
    "mf_plan_run": lambda s: {"config_path": s.config(), "team": "personal"},
    "mf_dispatch_run": _dispatch,
    "mf_stop_run": _stop,
    "mf_pause_run": _control("mf_pause_run", Stage.run),
    "mf_restart_run": _control("mf_restart_run", Stage.checkpointed_run),
    "mf_resume_run": _control("mf_resume_run", Stage.paused_run),
    "mf_list_launches": _launches,
    "mf_get_run": lambda s: {"run_id": s.run()},
    "mf_list_runs": lambda s: (s.run(), {})[1],
    "mf_check_progress": lambda s: {"run_id": s.run()},
    "mf_get_logs": lambda s: {"run_id": s.run()},
    "mf_summarize_logs": lambda s: {"run_id": s.run()},
    "mf_export_logs": lambda s: {"run_id": s.run(), "dest": s.path()},
    "mf_get_spend": lambda s: {"run_id": s.run()},
    "mf_get_metrics": lambda s: {"run_id": s.run()},
    "mf_plot_metrics": lambda s: {"run_id": s.run(), "dest": s.path(".png")},
    "mf_compare_runs": lambda s: {"run_ids": [s.run(), s.run(step=5)], "plot_path": s.path(".png")},
    "mf_list_checkpoints": lambda s: {"run_id": s.run(step=6)},
    "mf_wait_for_run": lambda s: {"run_id": s.run(), "timeout_seconds": 30},
    # the report without its PNG: rendering it is mf_plot_metrics (its own row), a third of a second a call
    "mf_run_report": lambda s: {"run_id": s.run(), "plot": False},
    "mf_list_traces": lambda s: {"run_id": s.run()},
    "mf_download_traces": lambda s: {"run_id": s.run(step=2), "dest": s.path(), "max_traces": 4},
}


def missing_setups() -> list[str]:
    """Registry tools without a set-up (the harness fails while this is not empty)."""
    return [spec.name for spec in registry.TOOLS if spec.name not in SETUPS]


def arguments(tool: str, stage: Stage) -> dict[str, Any]:
    """Arguments of ``tool`` on ``stage``: its set-up's values, every other field left to the input
    model's default. :class:`SetupError` when the tool has no set-up, the set-up leaves a required
    field out or names a field the model does not have."""
    if tool not in SETUPS:
        raise SetupError(f"{tool} has no set-up: add it to SETUPS in tests/_proof/world.py")
    values = SETUPS[tool](stage)
    model = registry.get(tool).input_model
    unknown = sorted(set(values) - set(model.model_fields))
    missing = sorted(name for name, info in model.model_fields.items() if info.is_required() and name not in values)
    if unknown or missing:
        raise SetupError(f"the set-up of {tool} " + "; ".join(filter(None, [
            unknown and f"names fields its input has not: {', '.join(unknown)}",
            missing and f"leaves required fields out: {', '.join(missing)}"])))
    return values
