"""Typed tool functions for Prime Intellect's hosted Model Factory (pydantic in, pydantic out).

Modules, one per phase: ``preflight``, ``configs``, ``catalogue``, ``launch``, ``monitor``,
``traces``. Guardrails live in ``tools.guardrails``; the HTTP API in ``tools.platform``.
Nothing is imported eagerly, so ``import tools`` is cheap.
"""
