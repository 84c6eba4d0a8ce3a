"""Output budgets: every read tool, called against a busy emulator account, returns at most
8,000 characters of JSON; where it cut, it says ``truncated``, what it left out
(``omitted``), how to narrow (``narrow_hint``) and, where paging applies, where to go on.

"Busy": a 300-step run with a checkpoint every 2 steps (traces, metrics, logs, checkpoints),
a run whose environment server crash-loops (error logs), 30 more runs with long names,
and 30 planned launches in the ledger.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from typing import Any

import pytest
from _helpers import EXAMPLE, emulator_env

from skill import registry
from skill.emulator import EmulatorServer
from tools.core import Context
from tools.platform import wire

BUDGET = 8000


@pytest.fixture(scope="module")
def busy(module_emulator: EmulatorServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("busy")
    emu = module_emulator
    emu.state.max_concurrent_runs = 1000  # a busy account: many runs at once
    ctx = Context(env=emulator_env(emu, PRIME_DISABLE_VERSION_CHECK="1"), home=work, state_dir=work / "state",
                  cwd=work)
    config = tomllib.loads(EXAMPLE.read_text())
    long_run = {**config, "max_steps": 300, "ckpt": {"interval": 2}}
    platform = ctx.platform()
    main = platform.create_run(wire.build_create_body(long_run, name="busy-main")).run_id
    emu.state.set_scenario("crash_loop", None, at_step=2)
    crashing = platform.create_run(wire.build_create_body(config, name="busy-crash-loop")).run_id
    for i in range(30):
        platform.create_run(wire.build_create_body(config, name=f"busy-{i:02d}-" + "x" * 80))
    emu.state.advance(300 * 30 + 600)  # the long run has finished its 300 steps
    config_path = work / "task.toml"
    config_path.write_text(EXAMPLE.read_text())
    for _ in range(30):
        plan = registry.call_tool("mf_plan_run", {"config_path": str(config_path), "team": "personal"}, ctx)
        assert not registry.is_error(plan), plan
    yield {"ctx": ctx, "main": main, "crashing": crashing, "config": str(config_path), "emu": emu}
    ctx.close()


def calls(b: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each read tool with its defaults, and with the widest arguments it accepts."""
    main, crashing = b["main"], b["crashing"]
    return [
        ("mf_preflight", {}),
        ("mf_list_examples", {}),
        ("mf_validate_config", {"config_path": b["config"]}),
        ("mf_list_models", {}),
        ("mf_list_gpus", {}),
        ("mf_list_volumes", {}),
        ("mf_list_teams", {}),
        ("mf_list_launches", {}),
        ("mf_list_launches", {"limit": 200}),
        ("mf_get_run", {"run_id": main}),
        ("mf_get_run", {"run_id": crashing}),
        ("mf_list_runs", {}),
        ("mf_list_runs", {"limit": 100}),
        ("mf_check_progress", {"run_id": main}),
        ("mf_check_progress", {"run_id": crashing}),
        ("mf_get_logs", {"run_id": main}),
        ("mf_get_logs", {"run_id": main, "tail_lines": 1000, "component": "trainer"}),
        ("mf_get_logs", {"run_id": crashing, "tail_lines": 1000, "component": "env-server",
                         "env_name": "reverse-text"}),
        ("mf_summarize_logs", {"run_id": main}),
        ("mf_summarize_logs", {"run_id": crashing}),
        ("mf_get_spend", {"run_id": main}),
        ("mf_get_metrics", {"run_id": main}),
        ("mf_get_metrics", {"run_id": main, "max_points": 10_000}),
        ("mf_list_checkpoints", {"run_id": main}),
        ("mf_wait_for_run", {"run_id": main, "timeout_seconds": 1}),
        ("mf_list_traces", {"run_id": main}),
        ("mf_list_traces", {"run_id": main, "limit": 10_000}),
        ("mf_list_traces", {"run_id": main, "kind": "episodes", "limit": 10_000}),
        ("mf_list_traces", {"run_id": main, "kind": "eval_runs"}),
    ]


def _limit(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Clamp an argument given as 'as wide as possible' to the schema's stated maximum."""
    out = dict(arguments)
    model = registry.get(name).input_model
    for key, value in arguments.items():
        for meta in model.model_fields[key].metadata:
            if isinstance(value, int) and getattr(meta, "le", None) is not None:
                out[key] = min(value, meta.le)
    return out


def test_every_read_tool_is_covered() -> None:
    fake = {"main": "r", "crashing": "r", "config": "c"}
    covered = {name for name, _ in calls(fake)}
    # mf_wait_for_run may pause a run at its spend cap (not read-only), and is still a read tool here
    assert covered == {s.name for s in registry.TOOLS if s.read_only} | {"mf_wait_for_run"}


def test_read_tools_stay_within_budget_and_say_what_they_cut(busy: dict[str, Any]) -> None:
    cut = []
    for name, arguments in calls(busy):
        arguments = _limit(name, arguments)
        result = registry.call_tool(name, arguments, busy["ctx"])
        assert not registry.is_error(result), f"{name}({arguments}): {result}"
        size = len(registry.result_json(result))
        assert size <= BUDGET, f"{name}({arguments}) returned {size} characters of JSON"
        payload = result.model_dump()
        if payload.get("truncated"):
            cut.append(name)
            assert "omitted" in payload, f"{name} cut without an omitted field"
            assert payload.get("narrow_hint"), f"{name} cut without saying how to narrow"
            if "next_cursor" in payload:  # cursor paging: the rest is one call away
                assert payload["next_cursor"], f"{name} cut without a next_cursor"
            else:  # nothing to page to: the result counts or names what it left out
                assert payload["omitted"], f"{name} cut without saying what it omitted"
            if "next_page" in payload and payload["next_page"] is None:  # a page cut short: smaller pages
                assert "limit" in payload["narrow_hint"], f"{name} cut its last page without saying how to page"
    # the busy account really makes the big reads cut (otherwise this test proves little)
    assert {"mf_get_logs", "mf_list_traces", "mf_list_launches", "mf_list_runs"} <= set(cut), cut


def test_a_cut_page_can_be_followed(busy: dict[str, Any]) -> None:
    ctx = busy["ctx"]
    first = registry.call_tool("mf_list_traces", _limit("mf_list_traces", {"run_id": busy["main"], "limit": 10_000}),
                               ctx)
    assert first.truncated and first.next_cursor  # type: ignore[attr-defined]
    second = registry.call_tool("mf_list_traces", {"run_id": busy["main"], "cursor": first.next_cursor}, ctx)
    assert not registry.is_error(second), second
    first_ids = {t["trace_id"] if "trace_id" in t else str(t) for t in first.model_dump()["traces"]}
    second_ids = {t["trace_id"] if "trace_id" in t else str(t) for t in second.model_dump()["traces"]}
    assert second_ids and not first_ids & second_ids
