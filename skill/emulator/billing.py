"""What ``GET /billing/runs/{id}/usage`` reports: token usage and its cost, in the endpoint's
own units (tokens, USD per million tokens), accrued over the run's running time.

The real ``RunUsage`` (prime-api.md §2.6) is per token; a dedicated run is placed per GPU-hour
(``pricePerGpuHour`` x ``gpuCount``). The emulator reconciles the two as a platform billing
GPU time would: tokens flow at a nominal throughput for every billed second (not queue, start-up
or a pause: docs/hosted-training/billing), and the per-million-token prices are those that make the cost per hour equal
the run's hourly price. So ``total_cost_usd`` = running hours x hourly price, whatever the
step count. Reserved runs (no quoted price) report tokens at cost 0 and null prices.
"""

from __future__ import annotations

import math
from typing import Any

#: Nominal generation throughput, tokens per second (the ``throughput/tokens_per_sec`` metric's mean).
TOKENS_PER_SECOND = 9000.0
#: Prompt tokens per generated token (the inference log line's prompt vs generation throughput).
PROMPT_SHARE = 1 / 3
#: Price of an output token relative to an input token, for inference.
OUTPUT_PRICE_RATIO = 4.0
#: Share of an RL run's hourly price billed as training (the rest as inference).
TRAINING_SHARE_RL = 0.5
#: One usage record per this many running seconds (started).
RECORD_SECONDS = 60.0


def run_usage(*, run_id: str, run_name: str | None, base_model: str | None, status: str,
              running_seconds: float, usd_per_hour: float | None, sft: bool) -> dict[str, Any]:
    """The ``RunUsage`` JSON of a run that has been running ``running_seconds`` (simulated) at
    ``usd_per_hour`` (price per GPU-hour x GPUs; None for reserved capacity).

    Training: input = prompt tokens, output = generated tokens, both per second of running.
    Inference (RL runs; none for SFT): the same token flow, priced per input and output token.
    """
    output = round(running_seconds * TOKENS_PER_SECOND)
    prompt = round(running_seconds * TOKENS_PER_SECOND * PROMPT_SHARE)
    training_share = 1.0 if sft else TRAINING_SHARE_RL
    per_hour_out = TOKENS_PER_SECOND * 3600 / 1e6  # million generated tokens per hour
    per_hour_in = per_hour_out * PROMPT_SHARE
    pricing: dict[str, float | None] = {"training_per_mtok": None, "inference_input_per_mtok": None,
                                        "inference_output_per_mtok": None}
    training_cost = inference_cost = 0.0
    if usd_per_hour is not None:
        training_rate = usd_per_hour * training_share / (per_hour_in + per_hour_out)
        training_cost = (prompt + output) / 1e6 * training_rate
        pricing["training_per_mtok"] = round(training_rate, 6)
        if not sft:
            input_rate = usd_per_hour * (1 - training_share) / (per_hour_in + OUTPUT_PRICE_RATIO * per_hour_out)
            inference_cost = prompt / 1e6 * input_rate + output / 1e6 * input_rate * OUTPUT_PRICE_RATIO
            pricing["inference_input_per_mtok"] = round(input_rate, 6)
            pricing["inference_output_per_mtok"] = round(input_rate * OUTPUT_PRICE_RATIO, 6)
    inference_in, inference_out = (0, 0) if sft else (prompt, output)
    return {
        "run_id": run_id, "run_name": run_name, "base_model": base_model, "status": status,
        "training": {"tokens": prompt + output, "input_tokens": prompt, "output_tokens": output,
                     "cost_usd": round(training_cost, 6)},
        "inference": {"tokens": inference_in + inference_out, "input_tokens": inference_in,
                      "output_tokens": inference_out, "cost_usd": round(inference_cost, 6)},
        "total_tokens": prompt + output + inference_in + inference_out,
        "total_cost_usd": round(training_cost + inference_cost, 6),
        "record_count": math.ceil(running_seconds / RECORD_SECONDS),
        "pricing": pricing,
    }
