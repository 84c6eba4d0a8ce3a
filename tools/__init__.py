"""Typed tool functions for Prime Intellect's hosted Model Factory (pydantic in, pydantic out).

One module or package per workflow phase holds the tools: ``preflight``, ``catalogue``,
``configs``, ``launch``, ``monitor``, ``traces``. Below them: ``core`` (Context, ``@tool``, output
budget, run lookups, owner), ``guardrails``, ``errors`` (ToolError, ErrorCode) and ``platform``
(the HTTP API). docs/ARCHITECTURE.md draws the layers. Nothing is imported eagerly, so
``import tools`` is cheap.
"""
