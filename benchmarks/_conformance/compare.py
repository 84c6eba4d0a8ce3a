"""Agreement between a back-end's verdict and the reference.

"Agree" means the same verdict (valid or not) and, when both reject, the same first error as
a key path (union branch labels dropped; see :func:`schema_staging.key_path`). A back-end that
rejects what the reference accepts raises a *false alarm*; one that accepts what the reference
rejects has a *miss*; both rejecting at different places is a *different first error*.
When the reference could not run its run-start check (the fixture lacks the config's taskset)
and a back-end rejects only at that stage, nobody can tell: the case is *unverified* and left
out of the agreement ratio (it is counted and printed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from benchmarks._conformance.reference import RefVerdict
from schema_staging import Verdict, dotted

Outcome = Literal["agree", "miss", "false_alarm", "other_first_error", "unverified"]


def compare(ref: RefVerdict, ours: Verdict) -> Outcome:
    """How ``ours`` stands against ``ref``."""
    if ref.valid and ours.valid:
        return "agree"
    if ref.valid:
        first = ours.first_error
        if ref.run_start_unknown and first is not None and first.stage == "run_start":
            return "unverified"
        return "false_alarm"
    if ours.valid:
        return "miss"
    first = ours.first_error
    return "agree" if first is not None and first.loc == ref.path else "other_first_error"


@dataclass
class Tally:
    """Counts of one back-end over the corpus, and the cases that did not agree."""

    name: str
    total: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {"agree": 0, "miss": 0, "false_alarm": 0,
                                                            "other_first_error": 0, "unverified": 0})
    disagreements: list[tuple[str, Outcome, str]] = field(default_factory=list)

    def add(self, case_id: str, ref: RefVerdict, ours: Verdict) -> Outcome:
        outcome = compare(ref, ours)
        self.total += 1
        self.counts[outcome] += 1
        if outcome != "agree":
            first = ours.first_error
            detail = (f"reference: {'valid' if ref.valid else dotted(ref.path) or '<file>'} ({ref.stage}); ours: "
                      f"{'valid' if ours.valid else (dotted(first.loc) or '<file>') if first else '?'}"
                      f"{' - ' + first.message[:90] if first and not ours.valid else ''}")
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
    rows = [f"{'back-end':<28}{'agree':>15}{'misses':>8}{'false alarms':>14}{'other 1st error':>17}"
            f"{'unverified':>12}"]
    for t in tallies:
        rows.append(f"{t.name:<28}{t.counts['agree']:>5}/{t.judged:<3} {t.agreement:>6.1%}{t.counts['miss']:>8}"
                    f"{t.counts['false_alarm']:>14}{t.counts['other_first_error']:>17}{t.counts['unverified']:>12}")
    return rows
