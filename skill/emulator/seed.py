"""Seeded accounts and catalogue of the emulator: users, keys, teams, models, GPU types, volumes.

Everything here is obviously fake. Ids follow the platform's CUID shape (``^c[a-z0-9]{24}$``,
the check ``prime config set-team-id`` applies), so the default seed has one user with a
personal account *and* two teams: "which owner?" is a real question against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def cuid(kind: str, number: int) -> str:
    """A fake CUID-shaped id: ``c`` + ``kind`` + zero-padded ``number`` (25 characters)."""
    body = f"{kind}{number:0{24 - len(kind)}d}"
    if len(body) != 24 or not body.isalnum() or body.lower() != body:
        raise ValueError(f"cannot build a CUID-shaped id from {kind!r}/{number}")
    return "c" + body


#: The default API key (obviously fake). It belongs to :data:`DEFAULT_USER_ID`.
DEFAULT_API_KEY = "mf-emulator-key-0000"
#: A second user's key: member of the research team only, with a personal account of its own.
OTHER_API_KEY = "mf-emulator-key-0001"

DEFAULT_USER_ID = cuid("user", 1)
OTHER_USER_ID = cuid("user", 2)
#: Team the default user administers; it also holds a reserved (price-less) GPU allocation.
TEAM_RESEARCH_ID = cuid("team", 1)
#: Second team of the default user (role MEMBER); on-demand capacity only.
TEAM_EVALS_ID = cuid("team", 2)

#: Clock speeds: real time, and the demo's (a 20-step run completes in about 4 s of wall time).
DEFAULT_SPEED = 1.0
DEMO_SPEED = 200.0


@dataclass
class User:
    """An account holder: ``id``, display fields, and the API keys that authenticate as it."""

    id: str
    name: str
    email: str
    slug: str
    keys: list[str]


@dataclass
class Team:
    """A team and its members (``user id -> role``)."""

    id: str
    name: str
    slug: str
    created_at: str
    members: dict[str, str]
    #: GPU types reserved for this team (no per-hour price is quoted for them).
    reserved_gpu_types: list[str] = field(default_factory=list)


@dataclass
class GpuType:
    """A GPU type. ``price_per_gpu_hour`` is ``None`` for reserved-only types (unknown price)."""

    name: str
    price_per_gpu_hour: float | None
    available_now: bool = True
    discount_label: str | None = None
    is_beta: bool = True
    cluster_id: str = ""
    cluster_name: str = ""


@dataclass
class Model:
    """A model the platform can train, and the GPU types whose clusters have it cached."""

    name: str
    gpu_types: list[str]
    params_billion: float


@dataclass
class Volume:
    """A named volume owned by a team (or a user's personal account when ``team_id`` is None)."""

    name: str
    team_id: str | None
    owner_user_id: str
    size: str = "5Ti"
    created_at_sim: float = 0.0
    ready_at_sim: float = 0.0


@dataclass
class Seed:
    """Everything the emulator starts with. Build with :func:`default_seed` and adjust."""

    users: list[User]
    teams: list[Team]
    gpu_types: list[GpuType]
    models: list[Model]
    volumes: list[Volume]
    #: GPU type used when a create names none and the owner has no reservation.
    default_gpu_type: str = "H200_141GB"

    def user_for_key(self, key: str) -> User | None:
        """The user an API key authenticates as, or None."""
        for user in self.users:
            if key in user.keys:
                return user
        return None

    def team(self, team_id: str) -> Team | None:
        """The team with this id, or None."""
        return next((t for t in self.teams if t.id == team_id), None)

    def user(self, user_id: str) -> User | None:
        """The user with this id, or None."""
        return next((u for u in self.users if u.id == user_id), None)

    def gpu(self, name: str) -> GpuType | None:
        """The GPU type with this name, or None."""
        return next((g for g in self.gpu_types if g.name == name), None)

    def model(self, name: str) -> Model | None:
        """The model with this name, or None."""
        return next((m for m in self.models if m.name == name), None)

    def gpu_types_for(self, team_id: str | None) -> list[GpuType]:
        """GPU types an owner may dispatch on: every on-demand type plus the team's reservations."""
        team = self.team(team_id) if team_id else None
        reserved = set(team.reserved_gpu_types) if team else set()
        return [g for g in self.gpu_types if g.price_per_gpu_hour is not None or g.name in reserved]


def default_seed() -> Seed:
    """The default accounts and catalogue (see the module docstring)."""
    users = [
        User(DEFAULT_USER_ID, "Emulator User", "emulator-user@example.invalid", "emulator-user", [DEFAULT_API_KEY]),
        User(OTHER_USER_ID, "Other User", "other-user@example.invalid", "other-user", [OTHER_API_KEY]),
    ]
    teams = [
        Team(TEAM_RESEARCH_ID, "Emulator Research", "emulator-research", "2026-01-05T09:00:00Z",
             {DEFAULT_USER_ID: "ADMIN", OTHER_USER_ID: "MEMBER"}, reserved_gpu_types=["A100_80GB"]),
        Team(TEAM_EVALS_ID, "Emulator Evals", "emulator-evals", "2026-03-10T09:00:00Z",
             {DEFAULT_USER_ID: "MEMBER"}),
    ]
    gpu_types = [
        GpuType("H100_80GB", 1.8, True, None, True, cuid("pcl", 1), "on-demand-h100"),
        GpuType("H200_141GB", 2.5, True, "20% off (emulated offer)", True, cuid("pcl", 2), "on-demand-h200"),
        GpuType("B200_180GB", 3.9, False, None, True, cuid("pcl", 3), "on-demand-b200"),
        # Reserved-only: no on-demand price, so cost estimates must say "unknown".
        GpuType("A100_80GB", None, True, None, False, cuid("pcl", 4), "athens-reserved"),
    ]
    small = ["H100_80GB", "H200_141GB", "B200_180GB", "A100_80GB"]
    models = [
        Model("PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT", small, 0.6),
        Model("PrimeIntellect/Qwen3-0.6B", small, 0.6),
        Model("PrimeIntellect/Qwen3-1.7B-Wordle-SFT", small, 1.7),
        Model("PrimeIntellect/Qwen3-1.7B", small, 1.7),
        Model("Qwen/Qwen3-4B-Instruct-2507", small, 4.0),
        Model("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", small, 1.5),
        Model("Qwen/Qwen3-30B-A3B-Thinking-2507", ["H200_141GB", "B200_180GB"], 30.0),
        Model("zai-org/GLM-4.5-Air", ["B200_180GB"], 106.0),
    ]
    volumes = [
        Volume("research-data", TEAM_RESEARCH_ID, DEFAULT_USER_ID),
        Volume("evals-data", TEAM_EVALS_ID, DEFAULT_USER_ID),
    ]
    return Seed(users=users, teams=teams, gpu_types=gpu_types, models=models, volumes=volumes)
