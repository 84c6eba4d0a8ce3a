"""Guardrails enforced in code: confirmation gate, secrets by name, launch ledger, budget policy."""
