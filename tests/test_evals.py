"""The scenario evals (evals/cases.yaml) replayed on the emulator.

Each positive case's expected sequence runs through the registry as an agent would call it: every
tool exists, every argument set validates, the order passes the guardrails (a dispatch only of a
plan made in the case, a confirmation only from a person's approval after confirmation_required,
a stop only with the person's confirmation of that stop), and the final state is the case's. A
negative case names no tool, and the skill's text names the alternative it belongs to. Time is
injected: waits move the emulator's clock.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from _helpers import EXAMPLE, emulator_env, split_skill
from conftest import FakeTime

from skill import registry
from tools.core import Context
from tools.errors import ToolError
from tools.launch import approve_plan

ROOT = Path(__file__).resolve().parent.parent
CASES = yaml.safe_load((ROOT / "evals" / "cases.yaml").read_text(encoding="utf-8"))
POSITIVE = [c for c in CASES if c["should_trigger"]]
NEGATIVE = [c for c in CASES if not c["should_trigger"]]
FAKE_WANDB = "wandb_v1_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE00"
PLACEHOLDER = re.compile(r"\{([a-z_]+)(?:\.([a-z_]+))?\}")


class Replay:
    """One case on a fresh emulator world: the agent's calls, the person's approvals, the checks."""

    def __init__(self, emulator: Any, root: Path) -> None:
        self.emulator, self.root = emulator, root
        for sub in ("home", "state", "project"):
            (root / sub).mkdir()
        self.env = emulator_env(emulator, HOME=str(root / "home"), WANDB_API_KEY=FAKE_WANDB,
                                PATH=os.environ.get("PATH", ""))
        self.time = FakeTime(emulator)  # waits move the emulator's clock, not the wall clock
        self.ctx = self.context()
        self.saved: dict[str, Any] = {}
        self.planned: set[str] = set()
        self.codes: dict[str, str] = {}  # confirmation -> the plan a person approved with it
        self.asked: set[str] = set()  # plans whose gated call answered confirmation_required
        self.runs_before: set[str] = set()

    def context(self, **extra: Any) -> Context:
        return Context(env=self.env, home=self.root / "home", state_dir=self.root / "state",
                       cwd=self.root / "project", clock=self.time.clock, sleep=self.time.sleep, **extra)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, str):
            return value

        def look(match: re.Match[str]) -> Any:
            found = self.saved[match[1]]
            return getattr(found, match[2]) if match[2] else found

        whole = PLACEHOLDER.fullmatch(value)
        return look(whole) if whole else PLACEHOLDER.sub(lambda m: str(look(m)), value)

    # -- the world before the request -------------------------------------------------------
    def given(self, step: dict[str, Any]) -> None:
        if "policy" in step:
            folder = self.root / "home" / ".config" / "model-factory"
            folder.mkdir(parents=True)
            lines = [f"{k} = {v!r}".replace("'", '"') for k, v in step["policy"].items()]
            (folder / "policy.toml").write_text("\n".join(lines) + "\n")
            (folder / "policy.toml").chmod(0o600)
        elif "scenario" in step:
            params = dict(step["scenario"])
            self.emulator.state.set_scenario(params.pop("name"), **params)
        elif "advance" in step:
            self.emulator.state.advance(step["advance"])
        elif "pause" in step:  # paused earlier by the person (e.g. in the dashboard)
            self.emulator.state.run(self.resolve(step["pause"])).pause(self.emulator.state.now())
        elif "launch" in step:  # a run launched earlier through the tools, approved by the person then
            config = self.root / "project" / "launched.toml"
            shutil.copy(EXAMPLE, config)
            host = self.context(approver=lambda request: True)
            plan = registry.call_tool("mf_plan_run", {"config_path": str(config), "team": "personal",
                                                      **step["launch"]}, host)
            run = registry.call_tool("mf_dispatch_run", {"plan_id": plan.plan_id}, host)
            assert not isinstance(run, ToolError), run
            self.saved[step["save"]] = run
            host.close()
        else:
            raise AssertionError(f"unknown given step {step}")

    # -- what the agent and the person do ---------------------------------------------------
    def person(self, step: dict[str, Any]) -> None:
        if "plan_from" in step:
            error = self.saved[step["plan_from"]]
            plan_id = re.search(r"plan (\S+) needs a person's confirmation", error.message)[1]
        else:
            plan_id = self.resolve(step["plan"])
        assert plan_id in self.asked, "a person approves after the tool asked for it (confirmation_required)"
        person = self.context()
        code = approve_plan(plan_id, "terminal", person)  # `model-factory approve PLAN_ID` in their terminal
        person.close()
        self.codes[code] = plan_id
        self.saved[step["save"]] = code

    def check_guardrails(self, tool: str, arguments: dict[str, Any]) -> None:
        if tool == "mf_dispatch_run":
            assert arguments["plan_id"] in self.planned, "dispatch only a plan made (and shown) in this case"
        if arguments.get("confirmation") is not None:
            assert arguments["confirmation"] in self.codes, "a confirmation comes from a person's approval only"
            if tool == "mf_dispatch_run":
                assert self.codes[arguments["confirmation"]] == arguments["plan_id"]

    def call(self, step: dict[str, Any]) -> None:
        tool = step["call"]
        assert registry.get(tool).name == tool
        arguments = self.resolve(step.get("args", {}))
        parsed = registry.check_arguments(tool, arguments)
        assert not isinstance(parsed, ToolError), parsed
        self.check_guardrails(tool, arguments)
        for _ in range(60 if step.get("repeat_until") else 1):
            result = registry.call_tool(tool, arguments, self.ctx)
            if "expect_error" in step:
                assert isinstance(result, ToolError) and result.code == step["expect_error"], result
                if result.code == "confirmation_required":
                    plan = arguments.get("plan_id") or re.search(r"plan (\S+) needs", result.message)[1]
                    self.asked.add(plan)
            else:
                assert not isinstance(result, ToolError), result
            if not step.get("repeat_until") or getattr(result, step["repeat_until"]):
                break
        else:
            raise AssertionError(f"{tool} never reached {step['repeat_until']}")
        for key, want in self.resolve(step.get("expect", {})).items():
            assert getattr(result, key) == want, (tool, key, getattr(result, key))
        if tool == "mf_plan_run":
            self.planned.add(result.plan_id)
        if "save" in step:
            self.saved[step["save"]] = result

    def run(self, case: dict[str, Any]) -> None:
        for step in case.get("given", []):
            self.given(step)
        self.runs_before = set(self.emulator.state.runs)
        for step in case["expected_calls"]:
            self.person(step) if "person" in step else self.call(step)
        final = self.resolve(case.get("final", {}))
        if "run" in final:
            run = self.emulator.state.run(final["run"])
            if "status" in final:
                assert run.status == final["status"], (run.status, final)
        if "runs_created" in final:
            assert len(set(self.emulator.state.runs) - self.runs_before) == final["runs_created"]

    def close(self) -> None:
        self.ctx.close()


def test_there_are_at_least_20_cases_with_unique_ids_both_kinds():
    assert len(CASES) >= 20 and len(POSITIVE) >= 12 and len(NEGATIVE) >= 6
    assert len({c["id"] for c in CASES}) == len(CASES)
    for case in CASES:
        assert case["prompt"].strip() and isinstance(case["should_trigger"], bool)


@pytest.mark.parametrize("case", POSITIVE, ids=[c["id"] for c in POSITIVE])
def test_a_positive_case_replays_on_the_emulator_within_the_guardrails(case, emulator, tmp_path):
    replay = Replay(emulator, tmp_path)
    try:
        replay.run(case)
    finally:
        replay.close()


@pytest.mark.parametrize("case", NEGATIVE, ids=[c["id"] for c in NEGATIVE])
def test_a_negative_case_names_no_tool_and_the_skill_excludes_it(case):
    assert case["expected_calls"] == []
    front, body = split_skill()
    description = front["description"]
    assert "Not for" in description
    if "alternative" in case:
        alternative = case["alternative"]
        assert alternative in description or alternative in body, f"the skill does not name {alternative}"
    else:  # unrelated work: nothing in the request is what the description triggers on
        triggers = [t.lower() for t in re.findall(r'"([^"]+)"', description)]
        prompt = case["prompt"].lower()
        assert not any(t in prompt for t in triggers) and "model factory" not in prompt and "prime" not in prompt
