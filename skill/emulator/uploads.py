"""The trace upload of one step: episodes and their member traces, with raw documents.

Deterministic for (run, attempt, step): re-reading never changes a trace, and a restarted
run (new attempt) uploads new trace ids for the steps it redoes, as a real producer would.
"""

from __future__ import annotations

from .content import hex_id, rng, rollout_text, trace_document
from .records import EpisodeRecord, TraceRecord


def step_upload(*, run_id: str, step: int, attempt: int, kind: str, at: float, ingested_at: float,
                spread_seconds: float, envs: list[str], episodes: int, per_episode: int, mean_reward: float,
                context: dict[str, str], model: str, user_id: str,
                team_id: str | None) -> list[tuple[EpisodeRecord, list[TraceRecord]]]:
    """``episodes`` episodes of ``per_episode`` traces each for ``step`` of trace run ``run_id``.

    Traces are created in the ``spread_seconds`` before ``at`` and all ingested at
    ``ingested_at``; rewards scatter around ``mean_reward``; about 3% of traces fail (unscored,
    outcome ``error``) and 5% are truncated. Environments rotate through ``envs``.
    """
    upload_id = hex_id(run_id, attempt, step, kind, "upload")
    uploads = []
    for e in range(episodes):
        env = envs[e % len(envs)]
        episode_id = "ep-" + hex_id(run_id, attempt, step, e, length=20)
        task_id = f"task-{rng(run_id, attempt, step, e, 'episode').randint(0, 9999):04d}"
        traces = []
        for m in range(per_episode):
            r = rng(run_id, attempt, step, e, m, "trace")
            trace_id = "tr-" + hex_id(run_id, attempt, step, e, m, length=24)
            has_error = r.random() < 0.03
            truncated = not has_error and r.random() < 0.05
            reward = None if has_error else round(min(1.0, max(0.0, r.gauss(mean_reward, 0.15))), 4)
            prompt, completion = rollout_text((run_id, attempt, step, e, m), env)
            raw = trace_document(trace_id, episode_id=episode_id, run_id=run_id, run_step=step, env=env,
                                 model=model, prompt=prompt, completion=completion, reward=reward)
            traces.append(TraceRecord(
                trace_id=trace_id, upload_id=upload_id, episode_id=episode_id, run_id=run_id, environment_id=env,
                task_id=task_id, model_id=model, agent_name="solver", reward=reward,
                outcome="error" if has_error else ("truncated" if truncated else "done"),
                has_error=has_error, is_truncated=truncated, duration_ms=r.randint(400, 3000),
                total_tokens=40 + (len(prompt) + len(completion)) // 3,
                created_at=at - spread_seconds + (e * per_episode + m) * 0.01, ingested_at=ingested_at,
                context=dict(context), run_step=step, user_id=user_id, team_id=team_id, raw=raw))
        failed = any(t.has_error for t in traces)
        uploads.append((EpisodeRecord(
            episode_id=episode_id, upload_id=upload_id, run_id=run_id, environment_id=env, task_id=task_id,
            outcome="error" if failed else "done", has_error=failed,
            error_type="RolloutError" if failed else None,
            error_message="sandbox command timed out" if failed else None,
            created_at=min(t.created_at for t in traces), ingested_at=ingested_at, run_step=step,
            user_id=user_id, team_id=team_id, context=dict(context)), traces))
    return uploads
