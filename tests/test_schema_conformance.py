"""Our back-ends against the platform's own validation, on the conformance corpus.

The reference is prime 0.18.0's code run unchanged (its ``_hosted_config`` in the prime
environment, its ``training_schema_worker`` on the fixture's prime-rl, then the full schema
with sources kept, as at run start): benchmarks/_conformance/reference.py. "Agree" is the
same verdict and the same first error key path. The real back-end must agree on every config
(the corpus and seeded random mutations of the examples); the snapshot with its rules on at
least 95% of the corpus (the figures are printed by benchmarks/validation_conformance.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import schema_staging
from benchmarks._conformance import corpus, envs
from benchmarks._conformance.compare import Tally
from benchmarks._conformance.reference import Reference, RefVerdict

pytest_plugins = ["_schema_env"]  # fixtures: schema_python, prime_python

RANDOM = corpus.fuzz(120, seed=7)


@pytest.fixture(scope="module")
def judged(prime_python: Path, schema_python: Path) -> Iterator[list[tuple[corpus.Case, dict, RefVerdict]]]:
    """Every corpus case and random mutation with the reference's verdict."""
    with Reference(prime_python, schema_python, envs.prime_worker_file(prime_python)) as reference:
        cases = [*corpus.cases(), *RANDOM]
        yield [(case, table, reference.judge(table)) for case in cases for table in [corpus.build(case)]]


def test_the_corpus_covers_all_ten_examples_with_at_least_120_mutations() -> None:
    cases = list(corpus.cases())
    assert {c.base for c in cases} == set(corpus.BASES)
    assert sum(1 for c in cases if c.ops) >= 120


def test_real_backend_agrees_with_prime_0_18_0_on_every_config(judged, schema_python: Path) -> None:
    tally = Tally("real")
    for case, table, ref in judged:
        tally.add(case.id, ref, schema_staging.check_real(table, mode=ref.mode, python=schema_python))  # type: ignore[arg-type]
    assert tally.counts["agree"] == tally.total, tally.disagreements


def test_snapshot_with_rules_agrees_on_at_least_95_percent_of_the_corpus(judged) -> None:
    tally = Tally("snapshot + rules")
    for case, table, ref in judged:
        if not case.id.startswith("fuzz/"):
            tally.add(case.id, ref, schema_staging.check_snapshot(table, mode=ref.mode))  # type: ignore[arg-type]
    assert tally.agreement >= 0.95, tally.disagreements
    assert tally.counts["false_alarm"] == 0, tally.disagreements
