"""What each run kind's plan priced against what the emulator bills, and where a spend cap paused a run.

    uv run python benchmarks/billing_table.py

For each run kind (bundled examples), on a fresh in-process emulator with its clock stopped: plan with
the tools (``mf_plan_run``), approve as the demo does (the host-callback channel, shown as such),
dispatch, then read what the platform reports for the run (GET ``/rft/runs/{id}`` ``gpuCount``, the
create's ``pricePerGpuHour`` / ``estimatedCostPerHour``) and what it bills for 10 minutes past start-up
(GET ``/billing/runs/{id}/usage``). Then a $5 cap (``approve --max-usd 5``) on the wordle RL example,
kept once by ``mf_wait_for_run`` and once by ``model-factory watch``'s loop: the spend when it paused.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from skill import registry  # noqa: E402
from skill.emulator import EmulatorServer, Timing  # noqa: E402
from tools.configs import EXAMPLES_DIR  # noqa: E402
from tools.core import Context  # noqa: E402
from tools.launch import DispatchRunInput, PlanRunInput, approve_plan, dispatch_run, plan_run, watch  # noqa: E402

T = Timing()
KINDS = [
    ("RL single node", "basic/wordle/rl.toml", {}),
    ("SFT + online eval", "basic/reverse-text/sft.toml", {}),
    ("SFT, no [inference]", "basic/wordle/sft.toml", {}),
    ("RL multi node", "advanced/qwen3-30b-a3b/math.toml", {"gpu_type": "H200_141GB"}),
]


class _Time:
    def __init__(self, server: EmulatorServer) -> None:
        self.server, self.now = server, 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.server.state.advance(seconds)


def _context(server: EmulatorServer, folder: Path) -> Context:
    (folder / "home").mkdir(parents=True, exist_ok=True)
    (folder / "project").mkdir(exist_ok=True)
    env = {"PRIME_API_KEY": server.api_key, "PRIME_API_BASE_URL": server.base_url, "PRIME_TRACES_URL": server.base_url}
    time = _Time(server)
    return Context(env=env, home=folder / "home", state_dir=folder / "state", cwd=folder / "project",
                   clock=time.clock, sleep=time.sleep)


def _launch(ctx: Context, config: Path, max_usd: float | None = None, **arguments: object) -> tuple[object, object]:
    plan = plan_run(PlanRunInput(config_path=str(config), team="personal", **arguments), ctx)
    token = approve_plan(plan.plan_id, "host_callback", ctx, max_usd=max_usd)
    return plan, dispatch_run(DispatchRunInput(plan_id=plan.plan_id, confirmation=token), ctx)


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def main() -> None:
    rows = [("run kind", "GPUs planned", "GPUs billed", "rate planned", "rate billed", "10 min billed")]
    with tempfile.TemporaryDirectory() as tmp:
        for i, (kind, rel, extra) in enumerate(KINDS):
            with EmulatorServer(speed=0) as server:
                ctx = _context(server, Path(tmp) / str(i))
                plan, launched = _launch(ctx, EXAMPLES_DIR / rel, max_steps=200, **extra)
                run = ctx.platform().get_run(launched.run_id)
                server.state.advance(T.queue_seconds + T.startup_seconds + 600)
                usage = ctx.platform().get_usage(launched.run_id)
                rows.append((kind, str(plan.gpu_count), str(run.gpu_count),
                             f"{_usd(plan.usd_per_gpu_hour)} x {plan.gpu_count} = {_usd(plan.usd_per_hour)}/h",
                             f"{_usd(launched.usd_per_gpu_hour)}/GPU-h, {_usd(launched.estimated_usd_per_hour)}/h",
                             _usd(usage.total_cost_usd)))
                ctx.close()
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        for r in rows:
            print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)))
        print()
        for how in ("mf_wait_for_run", "model-factory watch"):
            with EmulatorServer(speed=0) as server:
                ctx = _context(server, Path(tmp) / how.replace(" ", "-"))
                plan, launched = _launch(ctx, EXAMPLES_DIR / "basic/wordle/rl.toml", max_usd=5.0, run_kind="full")
                if how == "mf_wait_for_run":
                    for _ in range(500):
                        waited = registry.call_tool("mf_wait_for_run", {"run_id": launched.run_id}, ctx)
                        if waited.terminal or (waited.spend_cap and waited.spend_cap.action != "none"):
                            break
                    action = waited.spend_cap.action
                else:
                    action = watch(ctx, launched.run_id, interval_seconds=60).ended_because
                server.state.advance(120)
                sim = server.state.run(launched.run_id)
                billed = ctx.platform().get_usage(launched.run_id).total_cost_usd
                ready = [c.step for c in ctx.platform().list_checkpoints(launched.run_id) if c.status == "READY"]
                print(f"$5 cap via {how}: {action}; run {sim.status} at step {sim.current_step} of 200, billed "
                      f"{_usd(billed)} (plan: {_usd(plan.cost.usd_low)} low / {_usd(plan.cost.usd_expected)} expected);"
                      f" READY checkpoint at step {max(ready) if ready else 'none'}")
                ctx.close()


if __name__ == "__main__":
    main()
