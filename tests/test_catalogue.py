"""tools.catalogue over real HTTP against the emulator.

Expected values are read from the emulator's own seed (``emulator.state.seed``), the other
side of the wire, so the tests check the client's reading and joining, not copied numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _helpers import ok

from skill.emulator import OTHER_API_KEY, TEAM_EVALS_ID, TEAM_RESEARCH_ID, EmulatorServer
from skill.emulator.seed import Model
from tools.catalogue import (
    ListGpusInput,
    ListModelsInput,
    ListTeamsInput,
    ListVolumesInput,
    list_gpus,
    list_models,
    list_teams,
    list_volumes,
)
from tools.core import OUTPUT_BUDGET_CHARS, Context
from tools.errors import ToolError

UNUSED_TEAM = "c" + "z" * 24


@pytest.fixture
def ctx(mf_env: dict[str, str], tmp_path: Path) -> Context:
    return Context(env=mf_env, home=tmp_path / "home", state_dir=tmp_path / "state")


def context(env: dict[str, str], tmp_path: Path, **extra: str) -> Context:
    return Context(env={**env, **extra}, home=tmp_path / "home", state_dir=tmp_path / "state")


def test_gpu_prices_join_on_demand_offers(ctx: Context, emulator: EmulatorServer):
    seed = emulator.state.seed
    gpus = ok(list_gpus(ListGpusInput(), ctx))
    priced = {g.name: g for g in seed.gpu_types if g.price_per_gpu_hour is not None}
    assert [g.gpu_type for g in gpus.gpus] == list(priced)  # personal: on-demand types only
    for gpu in gpus.gpus:
        offer = priced[gpu.gpu_type]
        assert gpu.usd_per_gpu_hour == offer.price_per_gpu_hour and gpu.capacity == "on_demand"
        assert gpu.available_now == offer.available_now and gpu.discount_label == offer.discount_label
    assert gpus.owner.kind == "personal" and gpus.on_demand_beta_access is True


def test_reserved_gpu_has_unknown_price_for_its_team(ctx: Context, emulator: EmulatorServer):
    reserved = next(g.name for g in emulator.state.seed.gpu_types if g.price_per_gpu_hour is None)
    research = ok(list_gpus(ListGpusInput(team=TEAM_RESEARCH_ID), ctx))
    row = next(g for g in research.gpus if g.gpu_type == reserved)
    assert row.usd_per_gpu_hour is None and row.capacity == "reserved_or_unpriced" and row.available_now is None
    assert research.owner.team_id == TEAM_RESEARCH_ID and "never assume 0" in research.note
    evals = ok(list_gpus(ListGpusInput(team=TEAM_EVALS_ID), ctx))
    assert reserved not in {g.gpu_type for g in evals.gpus}


def test_models_and_offers(ctx: Context, emulator: EmulatorServer):
    seed = emulator.state.seed
    catalogue = ok(list_models(ListModelsInput(), ctx))
    assert [m.name for m in catalogue.models] == [m.name for m in seed.models]
    assert catalogue.total_models == len(seed.models) and not catalogue.truncated
    glm = next(m for m in catalogue.models if m.name == "zai-org/GLM-4.5-Air")
    assert glm.gpu_types == ["B200_180GB"] and glm.clusters[0].cluster_name
    offers = {o.gpu_type: o.usd_per_gpu_hour for o in catalogue.on_demand}
    assert offers == {g.name: g.price_per_gpu_hour for g in seed.gpu_types if g.price_per_gpu_hour is not None}
    assert catalogue.on_demand_beta_access is True
    narrowed = ok(list_models(ListModelsInput(search="qwen3-1.7b"), ctx))
    assert {m.name for m in narrowed.models} == {m.name for m in seed.models if "qwen3-1.7b" in m.name.lower()}


def test_models_team_scoping(ctx: Context, emulator: EmulatorServer):
    research = ok(list_models(ListModelsInput(team=TEAM_RESEARCH_ID), ctx))
    personal = ok(list_models(ListModelsInput(team="personal"), ctx))
    small = next(m for m in research.models if m.name == "PrimeIntellect/Qwen3-0.6B")
    assert "A100_80GB" in small.gpu_types  # the research team's reserved clusters
    assert "A100_80GB" not in next(m for m in personal.models if m.name == small.name).gpu_types
    assert personal.owner.kind == "personal" and personal.owner.source == "argument"


def test_models_unknown_beta_access_on_older_platform(ctx: Context, emulator: EmulatorServer):
    emulator.faults.status(404, "GET", "/training/available-fft-models")
    catalogue = ok(list_models(ListModelsInput(), ctx))
    assert catalogue.models == [] and catalogue.on_demand_beta_access is None


def test_models_output_budget(ctx: Context, emulator: EmulatorServer):
    emulator.state.seed.models.extend(
        Model(f"example-org/emulated-model-with-a-rather-long-name-{i:03d}", ["H100_80GB", "H200_141GB"], 1.0)
        for i in range(60))
    catalogue = ok(list_models(ListModelsInput(), ctx))
    assert catalogue.truncated and catalogue.total_models == len(emulator.state.seed.models)
    assert len(catalogue.model_dump_json()) <= OUTPUT_BUDGET_CHARS
    assert catalogue.omitted > 0 and "search for part of the model name" in catalogue.narrow_hint
    assert catalogue.models and len(catalogue.models) < catalogue.total_models


def test_volumes_by_owner(ctx: Context, mf_env: dict[str, str], tmp_path: Path):
    research = ok(list_volumes(ListVolumesInput(team=TEAM_RESEARCH_ID), ctx))
    assert [v.name for v in research.volumes] == ["research-data"] and research.volumes[0].status_label == "created"
    assert research.volumes[0].size == "5Ti"
    assert [v.name for v in ok(list_volumes(ListVolumesInput(team=TEAM_EVALS_ID), ctx)).volumes] == ["evals-data"]
    assert ok(list_volumes(ListVolumesInput(), ctx)).volumes == []  # personal by default
    configured = ok(list_volumes(ListVolumesInput(), context(mf_env, tmp_path, PRIME_TEAM_ID=TEAM_EVALS_ID)))
    assert [v.name for v in configured.volumes] == ["evals-data"] and configured.owner.source == "PRIME_TEAM_ID"
    assert ok(list_volumes(ListVolumesInput(team=TEAM_RESEARCH_ID, search="nothing"), ctx)).volumes == []


def test_teams_show_ambiguous_owner(ctx: Context):
    teams = ok(list_teams(ListTeamsInput(), ctx))
    assert {t.team_id for t in teams.teams} == {TEAM_RESEARCH_ID, TEAM_EVALS_ID}
    assert teams.selected.kind == "personal" and teams.selected.source == "default"
    assert teams.launch_would_stop_ambiguous is True and not any(t.selected for t in teams.teams)
    assert "team set to personal or a team id" in teams.note


def test_teams_selected_from_env_and_config(mf_env: dict[str, str], tmp_path: Path):
    chosen = ok(list_teams(ListTeamsInput(), context(mf_env, tmp_path, PRIME_TEAM_ID=TEAM_EVALS_ID)))
    assert [t.team_id for t in chosen.teams if t.selected] == [TEAM_EVALS_ID]
    assert chosen.selected.team_name == "Emulator Evals" and not chosen.launch_would_stop_ambiguous
    home = tmp_path / "home" / ".prime"
    home.mkdir(parents=True)
    (home / "config.json").write_text('{"team_id": "%s"}' % TEAM_RESEARCH_ID)
    overridden = ok(list_teams(ListTeamsInput(), context(mf_env, tmp_path, PRIME_TEAM_ID=TEAM_EVALS_ID)))
    assert overridden.selected.team_id == TEAM_EVALS_ID and TEAM_RESEARCH_ID in (overridden.selected.note or "")
    stranger = ok(list_teams(ListTeamsInput(), context(mf_env, tmp_path, PRIME_TEAM_ID=UNUSED_TEAM)))
    assert stranger.selected_is_member is False and UNUSED_TEAM in stranger.note


def test_one_team_key(mf_env: dict[str, str], tmp_path: Path):
    teams = ok(list_teams(ListTeamsInput(), context(mf_env, tmp_path, PRIME_API_KEY=OTHER_API_KEY)))
    assert [t.team_id for t in teams.teams] == [TEAM_RESEARCH_ID] and teams.launch_would_stop_ambiguous


def test_errors(ctx: Context, mf_env: dict[str, str], tmp_path: Path):
    bad_team = list_gpus(ListGpusInput(team="not-a-team"), ctx)
    assert isinstance(bad_team, ToolError) and bad_team.code == "invalid_team" and "mf_list_teams" in bad_team.fix
    wrong = "fake-wrong-key-0123456789"
    denied = list_teams(ListTeamsInput(), context(mf_env, tmp_path, PRIME_API_KEY=wrong))
    assert isinstance(denied, ToolError) and denied.code == "unauthorized" and wrong not in denied.model_dump_json()
    stranger = list_volumes(ListVolumesInput(team=UNUSED_TEAM), ctx)
    assert isinstance(stranger, ToolError) and stranger.code in ("forbidden", "not_found")
    no_key = {k: v for k, v in mf_env.items() if k != "PRIME_API_KEY"}
    missing = list_models(ListModelsInput(), Context(env=no_key, home=tmp_path / "home"))
    assert isinstance(missing, ToolError) and missing.code == "credentials_missing"
    assert "PRIME_API_KEY" in missing.fix


def test_teams_output_budget_and_search(ctx: Context, emulator: EmulatorServer):
    from skill.emulator.seed import DEFAULT_USER_ID, Team, cuid

    emulator.state.seed.teams.extend(
        Team(cuid("bulk", i), f"Emulated bulk team number {i:03d}", f"bulk-{i:03d}", "2026-01-01T00:00:00Z",
             {DEFAULT_USER_ID: "MEMBER"}) for i in range(120))
    teams = ok(list_teams(ListTeamsInput(), ctx))
    assert teams.truncated and teams.total == 122 and len(teams.model_dump_json()) <= OUTPUT_BUDGET_CHARS
    assert teams.narrow_hint and "part of the team name" in teams.narrow_hint and teams.launch_would_stop_ambiguous
    found = ok(list_teams(ListTeamsInput(search="number 007"), ctx))
    assert [t.slug for t in found.teams] == ["bulk-007"] and not found.truncated
