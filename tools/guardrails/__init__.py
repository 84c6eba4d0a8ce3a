"""Guardrails enforced in code: confirmation gate, secrets by name, the state store, budget policy."""
