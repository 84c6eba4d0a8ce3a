"""Build the environments the tests use, before the tests run (``.ci/run`` calls it).

- The real prime-rl schema, with and without the four tasksets
  (``../shared/fixtures/prime-rl-schema/build-venv.sh``).
- ``prime`` 0.18.0 from PyPI (the interop tests and the conformance reference).

Each is cached under ``~/.cache/model-factory-skill`` (``MF_SCHEMA_CACHE``) and built only when missing
or changed (tests/_conformance/envs.py); built here, it costs no test its time bound. Prints what it
found or built and how long it took; exits 1 when one cannot be built (the tests would then fail where
``MF_REQUIRE_SCHEMA`` / ``MF_REQUIRE_INTEROP`` are set, and skip elsewhere).

    uv run python scripts/build_test_envs.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests._conformance import envs  # noqa: E402


def main() -> int:
    builds = {"prime-rl schema": lambda: envs.schema_python(tasksets=False),
              "prime-rl schema + tasksets": lambda: envs.schema_python(tasksets=True),
              f"prime {envs.PRIME_VERSION}": envs.prime_python}
    failed = 0
    for name, build in builds.items():
        started = time.monotonic()
        try:
            python = build()
        except envs.EnvironmentUnavailable as exc:
            print(f"{name}: cannot be built: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{name}: {python} ({time.monotonic() - started:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
