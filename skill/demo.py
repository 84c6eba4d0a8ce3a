"""``model-factory demo``: the whole workflow against the embedded emulator, no account.

preflight -> validate -> plan -> approval (the demo's automatic approval is a host-callback
channel and is shown as such) -> dispatch -> monitor to a terminal status -> download the
run's traces. Every step goes through :func:`skill.registry.call_tool`, the path agents use.
The config is the bundled, verbatim prime-rl ``examples/basic/reverse-text/rl.toml``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from skill import registry
from tools.configs import EXAMPLES_DIR
from tools.errors import ToolError

DEMO_CONFIG = EXAMPLES_DIR / "basic" / "reverse-text" / "rl.toml"
DEFAULT_SPEED = 100.0
WAIT_SLICE_SECONDS = 1


class DemoFailed(Exception):
    """A demo step returned a ToolError (carried in ``error``)."""

    def __init__(self, step: str, error: Any) -> None:
        super().__init__(f"{step}: [{error.code}] {error.message}")
        self.step = step
        self.error = error


def _call(step: str, name: str, arguments: dict[str, Any], ctx: Any) -> Any:
    result = registry.call_tool(name, arguments, ctx)
    if getattr(result, "error", False) is True:
        raise DemoFailed(step, result)
    return result


def run_demo(*, as_json: bool = False, dest: Path | None = None, speed: float | None = None) -> int:
    """Run the demo; print progress (stderr) and a summary (stdout). Returns the exit code.

    The summary has ``run_id``, ``status``, ``steps_completed``, ``final_reward``,
    ``traces_downloaded``, ``dest`` (and ``plan_id``, ``approval_channel``).
    """
    from skill.emulator import EmulatorServer
    from tools.core import Context

    console = Console(stderr=True, highlight=False)
    say = console.print
    state_dir = Path(tempfile.mkdtemp(prefix="model-factory-demo-state-"))
    home = Path(tempfile.mkdtemp(prefix="model-factory-demo-home-"))
    approvals: list[str] = []

    def demo_approver(request: Any) -> bool:
        say("[bold yellow]Approval:[/] the demo approves automatically (channel: demo host callback). "
            "With a real account a person approves here.")
        approvals.append("host_callback (demo auto-approval)")
        return True

    with EmulatorServer(speed=speed or DEFAULT_SPEED) as emu:
        env = {
            "PRIME_API_KEY": emu.api_key,
            "PRIME_API_BASE_URL": emu.base_url,
            "PRIME_TRACES_URL": emu.base_url,
            "PRIME_DISABLE_VERSION_CHECK": "1",
            "HOME": str(home),
            "PATH": os.environ.get("PATH", ""),
        }
        ctx = Context(env=env, home=home, state_dir=state_dir, approver=demo_approver)
        try:
            summary = _workflow(ctx, say, emu, dest)
        except DemoFailed as failed:
            say(f"[bold red]Demo stopped at {failed.step}:[/] [{failed.error.code}] {failed.error.message}")
            say(f"Fix: {failed.error.fix}")
            if as_json:
                print(json.dumps({"status": "DEMO_FAILED", "step": failed.step, "error": failed.error.model_dump()}))
            return 1
        finally:
            ctx.close()
    summary["approval_channel"] = approvals[0] if approvals else None
    if as_json:
        print(json.dumps(summary))
    else:
        out = Console(highlight=False)
        out.print("\n[bold]Demo complete[/]")
        for key in ("run_id", "status", "steps_completed", "final_reward", "traces_downloaded", "dest"):
            out.print(f"  {key:18} {summary[key]}")
    return 0 if summary["status"] == "COMPLETED" else 1


def _workflow(ctx: Any, say: Any, emu: Any, dest: Path | None) -> dict[str, Any]:
    say(f"[bold]Emulator[/] serving the Model Factory API at {emu.base_url}")

    pre = _call("preflight", "mf_preflight", {}, ctx)
    say(f"[bold]1. Preflight[/] {'ok' if pre.ok else 'problems'}: "
        + ", ".join(f"{c.name}={'ok' if c.ok else c.code}" for c in pre.checks))

    report = _call("validate", "mf_validate_config", {"config_path": str(DEMO_CONFIG)}, ctx)
    say(f"[bold]2. Validate[/] {DEMO_CONFIG.name}: mode={report.mode}, valid={report.valid}, "
        f"{len(report.errors)} errors, {len(report.warnings)} warnings")
    if not report.valid:
        raise DemoFailed("validate", ToolError(code="invalid_config",
                                               message="; ".join(e.message for e in report.errors),
                                               fix=f"model-factory validate-config {DEMO_CONFIG}"))

    plan = _call("plan", "mf_plan_run", {"config_path": str(DEMO_CONFIG), "team": "personal"}, ctx)
    say(f"[bold]3. Plan[/] {plan.plan_id}\n{plan.summary}")

    say("[bold]4. Dispatch[/] (asks the approver first)")
    dispatched = _call("dispatch", "mf_dispatch_run", {"plan_id": plan.plan_id}, ctx)
    run_id = dispatched.run_id
    say(f"   run {run_id} {dispatched.status}")

    say("[bold]5. Monitor[/]")
    last_line = None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        waited = _call("monitor", "mf_wait_for_run", {"run_id": run_id, "timeout_seconds": WAIT_SLICE_SECONDS}, ctx)
        progress = _call("monitor", "mf_check_progress", {"run_id": run_id}, ctx)
        step = f"{progress.latest_step or 0}/{progress.max_steps}"
        line = f"   {waited.status:10} step {step}  verdict={progress.verdict}"
        if line != last_line:
            say(line)
            last_line = line
        if waited.terminal:
            break
    run = _call("monitor", "mf_get_run", {"run_id": run_id}, ctx)
    metrics = _call("metrics", "mf_get_metrics", {"run_id": run_id}, ctx)
    final_reward = metrics.final.get("reward/all/mean") if getattr(metrics, "final", None) else None

    target = dest or Path.cwd() / "model-factory-demo" / run_id
    say(f"[bold]6. Traces[/] downloading to {target}")
    download = _call("traces", "mf_download_traces", {"run_id": run_id, "dest": str(target)}, ctx)
    return {
        "run_id": run_id,
        "plan_id": plan.plan_id,
        "status": run.status,
        "steps_completed": progress.latest_step,
        "final_reward": final_reward,
        "traces_downloaded": download.traces_downloaded,
        "dest": str(target),
    }


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_demo())
