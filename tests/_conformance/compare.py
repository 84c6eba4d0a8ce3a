"""Agreement between mf_validate_config's report and the reference, and running the tool on a table.

"Agree" means the same verdict (valid or not) and, when both reject, the same first error as
a key path (union branch labels dropped; see :func:`tools.configs.key_path`). A back-end that
rejects what the reference accepts raises a *false alarm*; one that accepts what the reference
rejects has a *miss*; both rejecting at different places is a *different first error*.
When the reference could not run its run-start check (the fixture lacks the config's taskset)
and a back-end rejects only at that stage, nobody can tell: the case is *unverified* and left
out of the agreement ratio (it is counted and printed). A report no schema judged (``valid``
null: ``schema_check`` structural) never agrees: it is *not judged*, counted against agreement.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomlkit

from tests._conformance.reference import RefVerdict
from tools.configs import ValidateConfigResult, dotted

Outcome = Literal["agree", "miss", "false_alarm", "other_first_error", "unverified", "not_judged"]
#: The words every issue found by the full checks ends with: the RL run start, the SFT submission.
RUN_START = ("checked when the run starts", "checked when the run is submitted")


def write_table(table: dict[str, Any], path: Path) -> Path:
    """``table`` written as TOML to ``path`` (tomlkit); raises ValueError when it does not read
    back as the same table (then the case cannot go through a file)."""
    path.write_text(tomlkit.dumps(table))
    if tomllib.loads(path.read_text()) != table:
        raise ValueError(f"{path.name}: the table does not survive a TOML round trip")
    return path


def validate(path: Path, ctx: Any, schema: str, mode: str) -> ValidateConfigResult:
    """mf_validate_config on ``path`` through the registry (as every surface calls it)."""
    from skill.registry import call_tool

    result = call_tool("mf_validate_config", {"config_path": str(path), "schema": schema, "mode": mode}, ctx)
    if not isinstance(result, ValidateConfigResult):
        raise RuntimeError(f"mf_validate_config failed on {path}: {result}")
    return result


def compare(ref: RefVerdict, ours: ValidateConfigResult) -> Outcome:
    """How ``ours`` stands against ``ref``."""
    first = ours.errors[0] if ours.errors else None
    if ours.valid is None:
        return "not_judged"
    if ref.valid and first is None:
        return "agree"
    if ref.valid:
        assert first is not None
        if ref.run_start_unknown and any(marker in first.message for marker in RUN_START):
            return "unverified"
        return "false_alarm"
    if first is None:
        return "miss"
    return "agree" if first.path == dotted(ref.path) else "other_first_error"


@dataclass
class Tally:
    """Counts of one back-end over the corpus, and the cases that did not agree."""

    name: str
    total: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {"agree": 0, "miss": 0, "false_alarm": 0,
                                                            "other_first_error": 0, "unverified": 0,
                                                            "not_judged": 0})
    disagreements: list[tuple[str, Outcome, str]] = field(default_factory=list)
    backends: dict[str, int] = field(default_factory=dict)

    def add(self, case_id: str, ref: RefVerdict, ours: ValidateConfigResult) -> Outcome:
        outcome = compare(ref, ours)
        self.total += 1
        self.counts[outcome] += 1
        which = ours.schema_check + (f" (fell back from {ours.fallback_from})" if ours.fallback_from else "")
        self.backends[which] = self.backends.get(which, 0) + 1
        if outcome != "agree":
            first = ours.errors[0] if ours.errors else None
            detail = (f"reference: {'valid' if ref.valid else dotted(ref.path) or '<file>'} ({ref.stage}); ours: "
                      f"{(first.path or '<file>') + ' - ' + first.message[:90] if first else 'valid'}")
            self.disagreements.append((case_id, outcome, detail))
        return outcome

    @property
    def judged(self) -> int:
        """Cases the reference could judge (all but the unverified)."""
        return self.total - self.counts["unverified"]

    @property
    def agreement(self) -> float:
        return self.counts["agree"] / self.judged if self.judged else 0.0


def summary_rows(tallies: Sequence[Tally]) -> list[str]:
    """One printed row per back-end: agreement, misses, false alarms, other first errors."""
    rows = [f"{'back-end':<12}{'agree':>17}{'misses':>8}{'false alarms':>14}{'other 1st error':>17}"
            f"{'unverified':>12}{'not judged':>12}"]
    for t in tallies:
        rows.append(f"{t.name:<12}{t.counts['agree']:>7}/{t.judged:<3} {t.agreement:>6.1%}{t.counts['miss']:>8}"
                    f"{t.counts['false_alarm']:>14}{t.counts['other_first_error']:>17}{t.counts['unverified']:>12}"
                    f"{t.counts['not_judged']:>12}")
    return rows
