"""Checked after every create: what the platform reports for a new run against the plan a person approved.

After POST ``/training/runs`` (a launch) or POST ``/training/runs/{id}/resume`` (a resume) answers,
:func:`check_created` compares the create's answer (``gpuType``, ``pricePerGpuHour``,
``estimatedCostPerHour``: reference/prime-api.md §2.4) and the run's detail read (GET
``/rft/runs/{id}``: ``gpuCount``, ``teamId``, ``volumeName``, ``maxSteps``: §2.2) with the plan's
GPU type and count, rate, owner, volume and step cap. Each difference is an alert in words
("billed 2 GPUs, you approved 1"), recorded with the create's outcome
(:class:`tools.guardrails.records.OutcomeFacts` ``alerts``), so check-progress and run-report keep
saying it (:func:`tools.core.alerts_of_run`). A run whose detail cannot be read is an alert too: unchecked is
not the same as matching.
"""

from __future__ import annotations

from tools.core import Context, owner_label
from tools.guardrails.records import PlanRecord
from tools.platform import errors as perr
from tools.platform import wire
from tools.units import usd

#: A rate differs when it is off by more than this many USD per hour (the platform rounds to 4 places).
RATE_TOLERANCE_USD = 0.005



def check_created(ctx: Context, plan: PlanRecord, created: wire.HostedRunCreated) -> list[str]:
    """The differences between the new run ``created`` and the approved ``plan``, in words (empty when
    it matches). One GET ``/rft/runs/{id}``; a failed read is itself an alert. Never raises."""
    alerts: list[str] = []
    price = plan.cost.usd_per_gpu_hour if plan.cost else None
    if plan.gpu_type and created.gpu_type and created.gpu_type != plan.gpu_type:
        alerts.append(f"placed on {created.gpu_type}, you approved {plan.gpu_type}")
    if price is not None and created.price_per_gpu_hour is not None \
            and abs(created.price_per_gpu_hour - price) > RATE_TOLERANCE_USD:
        alerts.append(f"billed {usd(created.price_per_gpu_hour)} per GPU-hour, you approved {usd(price)}")
    if price is not None and not created.on_demand:
        alerts.append("the platform answered without an on-demand price (reserved capacity?), you approved "
                      f"{usd(price)} per GPU-hour")
    try:
        run = ctx.platform().get_run(created.run_id)
    except perr.PlatformError as exc:
        alerts.append(f"the new run could not be read to check it against the plan ({exc.message})")
        return alerts
    if run.gpu_count is not None and plan.gpu_count is not None and run.gpu_count != plan.gpu_count:
        alerts.append(f"billed {run.gpu_count} GPUs, you approved {plan.gpu_count}")
    planned_hourly = price * plan.gpu_count if price is not None and plan.gpu_count else None
    if planned_hourly is not None and created.estimated_cost_per_hour is not None \
            and abs(created.estimated_cost_per_hour - planned_hourly) > RATE_TOLERANCE_USD:
        alerts.append(f"billed {usd(created.estimated_cost_per_hour)}/hour, you approved {usd(planned_hourly)}/hour")
    if (run.team_id or None) != (plan.team_id or None):
        alerts.append(f"billed to the {owner_label(run.team_id)}, you approved the "
                      f"{plan.owner_label or owner_label(plan.team_id)}")
    if plan.volume and run.volume_name != plan.volume:
        alerts.append(f"volume {run.volume_name or 'none'} attached, you approved {plan.volume}")
    if plan.action == "launch" and plan.max_steps is not None and run.max_steps != plan.max_steps:
        alerts.append(f"max steps {run.max_steps if run.max_steps is not None else 'none (unbounded)'}, you "
                      f"approved {plan.max_steps}")
    return alerts
