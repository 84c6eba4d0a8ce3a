"""The conformance benchmark's machinery: environments, reference, corpus (see
benchmarks/validation_conformance.py)."""
