"""mf_validate_config against the platform's own validation, on the conformance corpus.

The reference is prime 0.18.0's code run unchanged (its ``_hosted_config`` in the prime
environment, its ``training_schema_worker`` on the fixture's prime-rl, then the full schema
with sources kept, as at run start): tests/_conformance/reference.py. Each config is
written to a file and validated by mf_validate_config with ``schema="real"`` and
``schema="snapshot"``. "Agree" is the same verdict and the same first error key path. The real
back-end must agree on every config (the corpus and seeded random mutations of the examples);
the snapshot on at least 95% of the corpus, with no false alarm (the figures are printed by
benchmarks/validation_conformance.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._conformance import corpus, envs
from tests._conformance.compare import Tally, validate, write_table
from tests._conformance.reference import Reference, RefVerdict
from tools.core import Context

#: One worker runs this module: its module fixture is costly, and xdist would otherwise build it once per worker.
pytestmark = pytest.mark.xdist_group("test_schema_conformance")

RANDOM = corpus.fuzz(120, seed=7)


@pytest.fixture(scope="module")
def judged(prime_python: Path, schema_python: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[str, Path, RefVerdict]]]:
    """Every corpus case and random mutation, written to a file, with the reference's verdict."""
    folder = tmp_path_factory.mktemp("corpus")
    with Reference(prime_python, schema_python, envs.prime_worker_file(prime_python)) as reference:
        out = []
        for n, case in enumerate([*corpus.cases(), *RANDOM]):
            table = corpus.build(case)
            out.append((case.id, write_table(table, folder / f"{n:04d}.toml"), reference.judge(table)))
        yield out


def test_the_corpus_covers_all_ten_examples_with_at_least_120_mutations() -> None:
    cases = list(corpus.cases())
    assert {c.base for c in cases} == set(corpus.BASES)
    assert sum(1 for c in cases if c.ops) >= 120


def test_real_backend_agrees_with_prime_0_18_0_on_every_config(judged, real_schema_ctx: Context) -> None:
    tally = Tally("real")
    for case_id, path, ref in judged:
        tally.add(case_id, ref, validate(path, real_schema_ctx, "real", ref.mode))
    assert tally.backends == {"real": tally.total}, tally.backends
    # unverified: rejected at run start where the reference's fixture lacks a taskset (it cannot tell)
    assert tally.counts["agree"] == tally.judged and tally.judged >= tally.total - 8, tally.disagreements


def test_snapshot_agrees_on_at_least_95_percent_of_the_corpus_without_false_alarms(
        judged, real_schema_ctx: Context) -> None:
    tally = Tally("snapshot")
    for case_id, path, ref in judged:
        if not case_id.startswith("fuzz/"):
            tally.add(case_id, ref, validate(path, real_schema_ctx, "snapshot", ref.mode))
    assert tally.agreement >= 0.95, tally.disagreements
    assert tally.counts["false_alarm"] == 0, tally.disagreements
