"""The ranges numeric tool arguments are held to (pydantic ``Field`` bounds in every input model,
so the CLI, MCP and the registry refuse the same values as ``bad_arguments``).

No real run has more steps than :data:`MAX_STEPS` or a step slower than
:data:`MAX_SECONDS_PER_STEP` (a day); any other integer fits 64 bits (:data:`INT64_MAX`), what the
platform's JSON numbers and databases hold. Floats are finite (``allow_inf_nan=False``).
"""

#: Largest step count or step number an argument may name.
MAX_STEPS = 10_000_000
#: Largest seconds-per-step estimate (one day).
MAX_SECONDS_PER_STEP = 86_400
#: Largest integer any argument may hold (signed 64 bits).
INT64_MAX = 2**63 - 1
