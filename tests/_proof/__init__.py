"""Proof under faults and hostile input: the per-tool set-ups (:mod:`.world`) and the fault
matrix (:mod:`.matrix`), shared by ``benchmarks/fault_matrix.py`` and the tests."""
