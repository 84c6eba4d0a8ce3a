"""The confirmation gate: plan hash, approval tokens, the bypass list, launch-once, races."""

from __future__ import annotations

import copy
import hashlib
import multiprocessing as mp
import re
import tomllib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from _helpers import EXAMPLE

from tools.errors import ToolFailure
from tools.guardrails.confirmation import (
    PLAN_MATERIAL_KEYS,
    Claim,
    claim_dispatch,
    config_sha256,
    launch_state,
    list_launches,
    material_changes,
    mint,
    plan_hash,
    record_outcome,
    record_plan,
)
from tools.guardrails.records import OutcomeFacts, PlanRecord
from tools.guardrails.store import Store

TEAM_A = "cteam0000000000000000000001"
TEAM_B = "cteam0000000000000000000002"


def load_config() -> dict:
    return tomllib.loads(EXAMPLE.read_text())


def material(config: dict | None = None, **overrides) -> dict:
    m = {
        "config_sha256": config_sha256(config if config is not None else load_config()),
        "team_id": TEAM_A,
        "gpu_type": "H100_80GB",
        "gpu_count": 2,
        "volume": None,
        "source_ref": None,
        "image_tag": "v0.5.0",
        "secret_names": ["WANDB_API_KEY", "HF_TOKEN"],
        "max_steps": 20,
        "cost": {"usd_low": 1.25, "usd_expected": 2.5, "usd_high": 4.0, "usd_per_gpu_hour": 2.49},
    }
    m.update(overrides)
    return m


def plan(store: Store, plan_id: str = "plan_a", **overrides) -> str:
    m = material(**overrides)
    h = plan_hash(m)
    record_plan(store, PlanRecord.of(plan_id, h, m))
    return h


def code_of(exc_info: pytest.ExceptionInfo[ToolFailure]) -> str:
    return exc_info.value.error.code


@pytest.fixture
def ledger(tmp_path) -> Store:
    """The state store the gate records in (named for the launch ledger it replaced)."""
    store = Store(tmp_path / "state")
    yield store
    store.close()


# ------------------------------------------------------------------ plan hash


def test_plan_hash_is_canonical_sha256():
    m = material()
    h = plan_hash(m)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", h)
    reordered = dict(reversed(list(m.items())))
    reordered["secret_names"] = ["HF_TOKEN", "WANDB_API_KEY"]
    assert plan_hash(reordered) == h
    canonical = (
        '{"config_sha256":"%s","cost":{"usd_expected":2.5,"usd_high":4.0,"usd_low":1.25,"usd_per_gpu_hour":2.49},'
        '"gpu_count":2,"gpu_type":"H100_80GB","image_tag":"v0.5.0","max_steps":20,'
        '"secret_names":["HF_TOKEN","WANDB_API_KEY"],"source_ref":null,"team_id":"%s","volume":null}'
    ) % (m["config_sha256"], TEAM_A)
    assert h == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


@pytest.mark.parametrize("key,value", [
    ("team_id", TEAM_B), ("team_id", None), ("gpu_type", "H200_141GB"), ("gpu_count", 8), ("volume", "research"),
    ("source_ref", "main"), ("image_tag", "v0.6.0"), ("secret_names", ["WANDB_API_KEY"]), ("max_steps", 21),
    ("cost", {"usd_low": 1.25, "usd_expected": 2.5, "usd_high": 40.0, "usd_per_gpu_hour": 2.49}),
])
def test_every_material_fact_changes_the_hash(key, value):
    assert plan_hash(material(**{key: value})) != plan_hash(material())


def test_an_edited_config_changes_the_hash():
    edited = load_config()
    edited["max_steps"] = edited.get("max_steps", 0) + 1
    assert plan_hash(material(edited)) != plan_hash(material())
    same = tomllib.loads("# a comment only changes formatting\n" + EXAMPLE.read_text())
    assert plan_hash(material(same)) == plan_hash(material())


def test_material_changes_names_each_fact_that_moved():
    recorded = material()
    assert material_changes(recorded, material(secret_names=["HF_TOKEN", "WANDB_API_KEY"])) == []  # a set
    moved = material(team_id=TEAM_B, max_steps=400, secret_names=["HF_TOKEN"],
                     cost={**recorded["cost"], "usd_per_gpu_hour": 2.99, "usd_high": 4.8})
    assert material_changes(recorded, moved) == [
        ("team_id", TEAM_A, TEAM_B), ("secret_names", ["HF_TOKEN", "WANDB_API_KEY"], ["HF_TOKEN"]),
        ("max_steps", 20, 400), ("usd_high", 4.0, 4.8), ("usd_per_gpu_hour", 2.49, 2.99)]
    # A record missing a fact (an older ledger) shows it as moved from None.
    assert material_changes({k: v for k, v in recorded.items() if k != "volume"}, material(volume="data")) == [
        ("volume", None, "data")]


@pytest.mark.parametrize("key", PLAN_MATERIAL_KEYS)
def test_material_without_a_required_key_is_refused(key):
    m = material()
    del m[key]
    with pytest.raises(ValueError, match=key):
        plan_hash(m)


# ------------------------------------------------------------------ minting


def test_mint_returns_a_random_token_and_stores_only_its_hash_and_what_its_channel_checked(ledger):
    h = plan(ledger)
    t1 = mint(ledger, "plan_a", h, "terminal", owner=TEAM_A)
    t2 = mint(ledger, "plan_a", h, "policy", checked="budget policy /home/u/.config/model-factory/policy.toml")
    assert re.fullmatch(r"mfc_plan_a_[0-9a-f]{40}", t1) and t1 != t2
    ledger.close()  # the write-ahead log checkpointed into the file
    raw = ledger.path.read_bytes()
    assert t1.encode() not in raw and t2.encode() not in raw
    assert hashlib.sha256(t1.encode()).hexdigest().encode() in raw
    first, second = ledger.records_of(["plan_a"])[0]
    assert (first.channel, first.checked, first.owner, first.plan_hash) == (
        "terminal", "terminal, same user", TEAM_A, h)
    assert second.checked == "budget policy /home/u/.config/model-factory/policy.toml" and second.terms == {}
    ttl = datetime.fromisoformat(first.expires_at) - datetime.fromisoformat(first.minted_at)
    assert timedelta(seconds=899) < ttl <= timedelta(seconds=901)


def test_mint_refuses_unknown_plans_channels_and_ttls(ledger):
    h = plan(ledger)
    with pytest.raises(ToolFailure) as exc:
        mint(ledger, "plan_other", h, "terminal")
    assert code_of(exc) == "unknown_plan"
    with pytest.raises(ToolFailure) as exc:
        mint(ledger, "plan_a", plan_hash(material(gpu_count=4)), "terminal")
    assert code_of(exc) == "unknown_plan"
    with pytest.raises(ValueError):
        mint(ledger, "plan_a", h, "the_model_said_so")
    with pytest.raises(ValueError):
        mint(ledger, "plan_a", h, "terminal", ttl_seconds=0)


# ------------------------------------------------------------------ happy path and outcomes


def test_claim_records_an_attempt_and_consumes_the_token(ledger):
    h = plan(ledger)
    token = mint(ledger, "plan_a", h, "mcp_elicitation")
    assert launch_state(ledger, "plan_a").status == "approved"
    claim = claim_dispatch(ledger, "plan_a", h, token)
    assert isinstance(claim, Claim) and claim.plan_hash == h and claim.channel == "mcp_elicitation"
    state = launch_state(ledger, "plan_a")
    assert state.status == "in_flight" and state.attempts[0].outcome is None
    assert state.approvals[0].used
    record_outcome(ledger, "plan_a", claim.attempt_id, "created", run_id="cmrun01", usd_per_gpu_hour=2.49)
    state = launch_state(ledger, "plan_a")
    assert (state.status, state.run_id, state.last_outcome) == ("dispatched", "cmrun01", "created")
    assert state.attempts[0].facts == OutcomeFacts(usd_per_gpu_hour=2.49)
    assert state.plan.team_id == TEAM_A and state.plan.gpu_count == 2


def test_record_outcome_validates_its_input(ledger):
    h = plan(ledger)
    claim = claim_dispatch(ledger, "plan_a", h, mint(ledger, "plan_a", h, "terminal"))
    with pytest.raises(ValueError):
        record_outcome(ledger, "plan_a", claim.attempt_id, "succeeded")
    with pytest.raises(ValueError):
        record_outcome(ledger, "plan_a", claim.attempt_id, "created")  # no run id
    with pytest.raises(ValueError):
        record_outcome(ledger, "plan_a", "att_unknown", "not_sent")


def test_not_sent_does_not_consume_the_token(ledger):
    h = plan(ledger)
    token = mint(ledger, "plan_a", h, "terminal")
    first = claim_dispatch(ledger, "plan_a", h, token)
    record_outcome(ledger, "plan_a", first.attempt_id, "not_sent", detail="connection refused")
    assert launch_state(ledger, "plan_a").status == "approved"
    second = claim_dispatch(ledger, "plan_a", h, token)  # the network was down: try again
    assert second.attempt_id != first.attempt_id
    record_outcome(ledger, "plan_a", second.attempt_id, "created", run_id="cmrun02")
    assert launch_state(ledger, "plan_a").run_id == "cmrun02"


def test_rejected_needs_a_new_approval_but_may_be_retried(ledger):
    h = plan(ledger)
    token = mint(ledger, "plan_a", h, "terminal")
    claim = claim_dispatch(ledger, "plan_a", h, token)
    record_outcome(ledger, "plan_a", claim.attempt_id, "rejected", status_code=402)
    assert launch_state(ledger, "plan_a").status == "rejected"
    with pytest.raises(ToolFailure) as exc:
        claim_dispatch(ledger, "plan_a", h, token)
    assert code_of(exc) == "confirmation_used"
    claim_dispatch(ledger, "plan_a", h, mint(ledger, "plan_a", h, "terminal"))


# ------------------------------------------------------------------ the bypass list


def test_no_token_is_confirmation_required(ledger):
    h = plan(ledger)
    for token in (None, ""):
        with pytest.raises(ToolFailure) as exc:
            claim_dispatch(ledger, "plan_a", h, token)
        assert code_of(exc) == "confirmation_required"
        assert "model-factory approve plan_a" in exc.value.error.fix


def test_reused_token_after_a_created_run_is_already_dispatched_with_run_id(ledger):
    h = plan(ledger)
    token = mint(ledger, "plan_a", h, "terminal")
    claim = claim_dispatch(ledger, "plan_a", h, token)
    record_outcome(ledger, "plan_a", claim.attempt_id, "created", run_id="cmrun0000000000000000000a3")
    for again in (token, mint(ledger, "plan_a", h, "terminal")):  # even a fresh approval
        with pytest.raises(ToolFailure) as exc:
            claim_dispatch(ledger, "plan_a", h, again)
        assert code_of(exc) == "already_dispatched"
        assert "cmrun0000000000000000000a3" in exc.value.error.message


def test_forged_token_is_invalid(ledger):
    h = plan(ledger)
    mint(ledger, "plan_a", h, "terminal")
    with pytest.raises(ToolFailure) as exc:
        claim_dispatch(ledger, "plan_a", h, "mfc_plan_a_" + "0" * 40)
    assert code_of(exc) == "confirmation_invalid"


def test_altered_token_is_invalid(ledger):
    h = plan(ledger)
    token = mint(ledger, "plan_a", h, "terminal")
    for i in (len("mfc_plan_a_"), len(token) - 1):
        flipped = token[:i] + ("a" if token[i] != "a" else "b") + token[i + 1:]
        with pytest.raises(ToolFailure) as exc:
            claim_dispatch(ledger, "plan_a", h, flipped)
        assert code_of(exc) == "confirmation_invalid"
        assert token not in exc.value.error.model_dump_json()
    claim_dispatch(ledger, "plan_a", h, token)  # the real one still works


def test_expired_token(ledger):
    h = plan(ledger)
    minted_at = datetime(2030, 1, 1, 12, 0, tzinfo=timezone.utc)
    token = mint(ledger, "plan_a", h, "terminal", ttl_seconds=60, now=minted_at)
    with pytest.raises(ToolFailure) as exc:
        claim_dispatch(ledger, "plan_a", h, token, now=minted_at + timedelta(seconds=60))
    assert code_of(exc) == "confirmation_expired"
    claim_dispatch(ledger, "plan_a", h, token, now=minted_at + timedelta(seconds=59))


def test_token_for_another_plan_is_invalid_without_revealing_the_right_one(ledger):
    h_a = plan(ledger, "plan_a")
    h_b = plan(ledger, "plan_b", gpu_count=4)
    token_a = mint(ledger, "plan_a", h_a, "terminal")
    token_b = mint(ledger, "plan_b", h_b, "terminal")
    with pytest.raises(ToolFailure) as exc:
        claim_dispatch(ledger, "plan_b", h_b, token_a)
    assert code_of(exc) == "confirmation_invalid"
    text = exc.value.error.model_dump_json()
    assert token_a not in text and token_b not in text and "plan_a" not in text
    assert hashlib.sha256(token_b.encode()).hexdigest()[:12] not in text


def test_config_edited_after_approval_is_plan_changed(ledger):
    h = plan(ledger)
    token = mint(ledger, "plan_a", h, "terminal")
    edited = copy.deepcopy(load_config())
    edited.setdefault("model", {})["name"] = "Qwen/Qwen3-32B"
    with pytest.raises(ToolFailure) as exc:
        claim_dispatch(ledger, "plan_a", plan_hash(material(edited)), token)
    assert code_of(exc) == "plan_changed"
    assert launch_state(ledger, "plan_a").attempts == []  # nothing was claimed


def test_approval_for_a_different_team_is_plan_changed(ledger):
    h = plan(ledger, team_id=TEAM_A)
    token = mint(ledger, "plan_a", h, "terminal", owner=TEAM_A)
    with pytest.raises(ToolFailure) as exc:
        claim_dispatch(ledger, "plan_a", plan_hash(material(team_id=TEAM_B)), token)
    assert code_of(exc) == "plan_changed"


def test_unknown_plan(ledger):
    with pytest.raises(ToolFailure) as exc:
        claim_dispatch(ledger, "plan_nope", "sha256:00", "mfc_plan_nope_00")
    assert code_of(exc) == "unknown_plan"
    with pytest.raises(ToolFailure):
        launch_state(ledger, "plan_nope")


# ------------------------------------------------------------------ launch exactly once


@pytest.mark.parametrize("outcome", [None, "ambiguous", "still_unknown"])
def test_sent_or_in_flight_attempt_blocks_as_ambiguous(ledger, outcome):
    h = plan(ledger)
    claim = claim_dispatch(ledger, "plan_a", h, mint(ledger, "plan_a", h, "terminal"))
    if outcome:
        record_outcome(ledger, "plan_a", claim.attempt_id, outcome)
    with pytest.raises(ToolFailure) as exc:
        claim_dispatch(ledger, "plan_a", h, mint(ledger, "plan_a", h, "terminal"))
    assert code_of(exc) == "ambiguous_launch"
    assert exc.value.error.ambiguous
    assert "Do not repeat" in exc.value.error.fix
    assert launch_state(ledger, "plan_a").status == ("in_flight" if outcome is None else "ambiguous")


def test_reconciled_attempt_is_already_dispatched(ledger):
    h = plan(ledger)
    claim = claim_dispatch(ledger, "plan_a", h, mint(ledger, "plan_a", h, "terminal"))
    record_outcome(ledger, "plan_a", claim.attempt_id, "ambiguous")
    record_outcome(ledger, "plan_a", claim.attempt_id, "reconciled", run_id="cmrun_found")
    with pytest.raises(ToolFailure) as exc:
        claim_dispatch(ledger, "plan_a", h, mint(ledger, "plan_a", h, "terminal"))
    assert code_of(exc) == "already_dispatched" and "cmrun_found" in exc.value.error.message
    assert launch_state(ledger, "plan_a").status == "dispatched"


def test_a_restarted_agent_cannot_launch_the_same_plan_twice(tmp_path):
    state = tmp_path / "state"
    first = Store(state)
    h = plan(first)
    token = mint(first, "plan_a", h, "terminal")
    claim_dispatch(first, "plan_a", h, token)  # ... and the process dies before the outcome
    restarted = Store(state)
    with pytest.raises(ToolFailure) as exc:
        claim_dispatch(restarted, "plan_a", h, token)
    assert code_of(exc) == "ambiguous_launch"


def test_list_launches_most_recent_first(ledger):
    for name in ("plan_1", "plan_2", "plan_3"):
        plan(ledger, name)
    h = launch_state(ledger, "plan_1").plan_hash
    claim_dispatch(ledger, "plan_1", h, mint(ledger, "plan_1", h, "policy"))
    states = list_launches(ledger, limit=2)
    assert [s.plan_id for s in states] == ["plan_1", "plan_3"]
    assert states[0].status == "in_flight" and states[1].status == "planned"


def test_expired_approval_is_not_shown_as_approved(ledger):
    h = plan(ledger)
    t0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
    mint(ledger, "plan_a", h, "terminal", ttl_seconds=10, now=t0)
    assert launch_state(ledger, "plan_a", now=t0).status == "approved"
    assert launch_state(ledger, "plan_a", now=t0 + timedelta(seconds=11)).status == "planned"


# ------------------------------------------------------------------ races between processes


def _race(state: str, plan_id: str, h: str, token: str, barrier, results) -> None:
    ledger = Store(state)
    barrier.wait()
    try:
        claim = claim_dispatch(ledger, plan_id, h, token)
        results.put(("won", claim.attempt_id))
    except ToolFailure as failure:
        results.put(("lost", failure.error.code))


def _run_race(state: Path, h: str, tokens: list[str]) -> list[tuple[str, str]]:
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(len(tokens)), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(state), "plan_a", h, t, barrier, results)) for t in tokens]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return outcomes


@pytest.mark.parametrize("round_", range(3))
def test_processes_racing_on_one_token_exactly_one_wins(tmp_path, round_):
    ledger = Store(tmp_path)
    h = plan(ledger)
    token = mint(ledger, "plan_a", h, "terminal")
    outcomes = _run_race(tmp_path, h, [token] * 4)
    assert sorted(o[0] for o in outcomes) == ["lost", "lost", "lost", "won"]
    assert {o[1] for o in outcomes if o[0] == "lost"} == {"ambiguous_launch"}
    attempts = ledger.records_of(["plan_a"])[1]
    assert [a.attempt_id for a in attempts] == [o[1] for o in outcomes if o[0] == "won"]


@pytest.mark.parametrize("round_", range(2))
def test_processes_racing_with_two_approvals_exactly_one_wins(tmp_path, round_):
    ledger = Store(tmp_path)
    h = plan(ledger)
    tokens = [mint(ledger, "plan_a", h, "terminal"), mint(ledger, "plan_a", h, "host_callback")]
    outcomes = _run_race(tmp_path, h, tokens * 2)
    assert sorted(o[0] for o in outcomes) == ["lost", "lost", "lost", "won"]
    assert len(ledger.records_of(["plan_a"])[1]) == 1
