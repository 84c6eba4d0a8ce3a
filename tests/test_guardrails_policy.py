"""The budget policy: where it is read from, each limit, unknown facts, malformed files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.guardrails.policy import POLICY_ENV, PlanFacts, Policy, evaluate, load_policy, policy_path

FULL = """
max_usd_per_run = 25.0
max_gpus = 8
allowed_gpu_types = ["H100_80GB", "H200_141GB"]
allowed_models = ["Qwen/Qwen3-*", "meta-llama/Llama-3.1-8B"]
max_steps = 500
max_concurrent_runs = 2
owners = ["personal", "cteam0000000000000000000001"]
"""

GOOD = dict(usd_high=20.0, gpu_count=8, gpu_type="H100_80GB", model="Qwen/Qwen3-4B", steps=500,
            owner="personal", active_runs=1)


def write_policy(folder: Path, text: str, name: str = "policy.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text(text)
    p.chmod(0o600)
    return p


@pytest.fixture
def policy(tmp_path) -> Policy:
    loaded = load_policy(write_policy(tmp_path / "home" / ".config" / "model-factory", FULL))
    assert loaded.error is None and loaded.limits is not None
    return loaded


def decide(policy: Policy, **changes):
    return evaluate(policy, PlanFacts(**{**GOOD, **changes}))


# ------------------------------------------------------------------ location


def test_default_location_is_in_the_users_config_folder(tmp_path):
    assert policy_path({}, tmp_path) == tmp_path / ".config" / "model-factory" / "policy.toml"
    assert policy_path({POLICY_ENV: "  "}, tmp_path) == tmp_path / ".config" / "model-factory" / "policy.toml"
    assert policy_path({POLICY_ENV: str(tmp_path / "p.toml")}, tmp_path) == tmp_path / "p.toml"


def test_load_reads_the_env_path_then_the_default(tmp_path):
    home = tmp_path / "home"
    write_policy(home / ".config" / "model-factory", "max_usd_per_run = 1.0\n")
    other = write_policy(tmp_path / "elsewhere", "max_usd_per_run = 2.0\n")
    assert load_policy(env={}, home=home).limits.max_usd_per_run == 1.0
    assert load_policy(env={POLICY_ENV: str(other)}, home=home).limits.max_usd_per_run == 2.0


def test_missing_policy_authorizes_nothing(tmp_path):
    p = load_policy(env={}, home=tmp_path)
    decision = evaluate(p, PlanFacts(**GOOD))
    assert not decision.allowed and "No budget policy" in decision.reasons[0]


def test_policy_inside_the_project_folder_is_refused(tmp_path):
    project = tmp_path / "project"
    inside = write_policy(project / "configs", FULL)
    p = load_policy(env={POLICY_ENV: str(inside)}, agent_writable=[project, project / ".model-factory"])
    assert p.limits is None and "folder the agent writes to" in p.error
    assert not evaluate(p, PlanFacts(**GOOD)).allowed


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_policy_writable_by_others_is_refused(tmp_path):
    p = write_policy(tmp_path, FULL)
    p.chmod(0o666)
    loaded = load_policy(p)
    assert loaded.limits is None and "writable by group or others" in loaded.error


# ------------------------------------------------------------------ limits


def test_a_plan_within_every_limit_is_allowed_with_reasons(policy):
    d = decide(policy)
    assert d.allowed
    assert len(d.reasons) == 7
    assert d.policy_sha256 and d.policy_path.endswith("policy.toml")


@pytest.mark.parametrize("change,words", [
    ({"usd_high": 25.01}, "exceeds max_usd_per_run"),
    ({"gpu_count": 9}, "exceeds max_gpus"),
    ({"gpu_type": "A100_80GB"}, "not in allowed_gpu_types"),
    ({"model": "Qwen/Qwen2.5-7B"}, "not in allowed_models"),
    ({"steps": 501}, "exceeds max_steps"),
    ({"active_runs": 2}, "exceeds max_concurrent_runs"),
    ({"owner": "cteam0000000000000000000009"}, "not in owners"),
])
def test_each_limit_denies_when_exceeded(policy, change, words):
    d = decide(policy, **change)
    assert not d.allowed
    assert len(d.reasons) == 1 and words in d.reasons[0]


def test_limits_are_inclusive_and_models_accept_wildcards(policy):
    assert decide(policy, usd_high=25.0, gpu_count=8, steps=500, active_runs=1).allowed
    assert decide(policy, model="meta-llama/Llama-3.1-8B").allowed
    assert not decide(policy, model="meta-llama/Llama-3.1-8B-Instruct").allowed


def test_unknown_cost_is_never_pre_authorized(tmp_path):
    only_money = load_policy(write_policy(tmp_path, "max_usd_per_run = 1000.0\n"))
    d = evaluate(only_money, PlanFacts(usd_high=None))
    assert not d.allowed and "cost of the run is unknown" in d.reasons[0]
    assert evaluate(only_money, PlanFacts(usd_high=999.0)).allowed  # unset limits do not need facts


@pytest.mark.parametrize("fact", ["gpu_count", "gpu_type", "model", "steps", "owner", "active_runs"])
def test_an_unknown_fact_fails_the_limit_that_needs_it(policy, fact):
    d = decide(policy, **{fact: None})
    assert not d.allowed and len(d.reasons) == 1


def test_several_failures_are_all_reported(policy):
    d = decide(policy, usd_high=100.0, gpu_count=64, owner=None)
    assert not d.allowed and len(d.reasons) == 3


# ------------------------------------------------------------------ malformed files


@pytest.mark.parametrize("text,words", [
    ("max_usd_per_run = [", "not valid TOML"),
    ("max_gpus = 8\n", "max_usd_per_run: Field required"),
    ("max_usd_per_run = 10.0\nmax_usd_per_rn = 99.0\n", "max_usd_per_rn: Extra inputs are not permitted"),
    ('max_usd_per_run = "10"\n', "max_usd_per_run"),
    ("max_usd_per_run = 10.0\nmax_gpus = true\n", "max_gpus"),
    ("max_usd_per_run = -1.0\n", "greater than or equal to 0"),
    ("max_usd_per_run = inf\n", "max_usd_per_run: Input should be a finite number"),
    ("max_usd_per_run = +inf\n", "max_usd_per_run: Input should be a finite number"),
    ("max_usd_per_run = nan\n", "max_usd_per_run: Input should be a finite number"),
    ("max_usd_per_run = -inf\n", "max_usd_per_run"),
    ("max_usd_per_run = 10.0\nmax_gpus = -1\n", "max_gpus: Input should be greater than or equal to 1"),
    ("max_usd_per_run = 10.0\nmax_steps = inf\n", "max_steps"),
    ("max_usd_per_run = 10.0\nmax_concurrent_runs = -2\n", "max_concurrent_runs"),
    ('max_usd_per_run = 10.0\nallowed_gpu_types = "H100_80GB"\n', "allowed_gpu_types"),
    ("", "max_usd_per_run: Field required"),
])
def test_malformed_policy_authorizes_nothing_and_says_why(tmp_path, text, words):
    p = load_policy(write_policy(tmp_path, text))
    assert p.limits is None and words in p.error and str(tmp_path / "policy.toml") in p.error
    d = evaluate(p, PlanFacts(**GOOD))
    assert not d.allowed and d.reasons == [p.error]


def test_non_utf8_policy_is_malformed(tmp_path):
    p = tmp_path / "policy.toml"
    p.write_bytes(b"max_usd_per_run = 1.0 # \xff\n")
    p.chmod(0o600)
    assert "not valid TOML" in load_policy(p).error


def test_the_default_home_is_env_home_as_for_the_prime_config(tmp_path):
    """Without an explicit home the policy is read from env["HOME"], the folder the prime config comes
    from (tools.platform.settings.home_folder), not the home of the process."""
    home = tmp_path / "env-home"
    write_policy(home / ".config" / "model-factory", "max_usd_per_run = 3.0\n")
    assert policy_path({"HOME": str(home)}) == home / ".config" / "model-factory" / "policy.toml"
    assert load_policy(env={"HOME": str(home)}).limits.max_usd_per_run == 3.0
    given = tmp_path / "given"
    assert policy_path({"HOME": str(home)}, given) == given / ".config" / "model-factory" / "policy.toml"


def test_a_named_policy_that_is_missing_or_unreadable_is_a_problem(tmp_path):
    absent = load_policy(env={}, home=tmp_path)
    assert absent.error and absent.problem is None  # no policy at the default place: normal, nothing to report
    missing = tmp_path / "nowhere" / "policy.toml"
    named = load_policy(env={POLICY_ENV: str(missing)}, home=tmp_path)
    assert named.explicit and named.limits is None
    assert named.problem == f"{POLICY_ENV} names {missing}, but there is no file there; nothing is pre-authorized."
    assert not evaluate(named, PlanFacts(**GOOD)).allowed
    folder = tmp_path / "a-folder"
    folder.mkdir()
    unreadable = load_policy(env={POLICY_ENV: str(folder)}, home=tmp_path)
    assert unreadable.problem and "cannot be read" in unreadable.problem
    broken = write_policy(tmp_path / ".config" / "model-factory", "max_usd_per_run = 'lots'\n")
    assert load_policy(env={}, home=tmp_path).problem.startswith(f"The policy {broken} is malformed")
