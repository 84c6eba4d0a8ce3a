"""Reference, part 1: what ``prime train validate`` 0.18.0 does before its schema worker.

Runs in the prime 0.18.0 environment (``python _ref_cli.py``), imports prime's own functions
and runs them unchanged: ``toml.load`` for a file (prime's TOML reader), ``_hosted_config``
(CLI-only keys, deprecated ``[orchestrator]`` keys, with its warnings captured),
``_schema_input`` (drops ``name``) and ``_is_sft`` (the mode). Reads one JSON request per line
(``{"id", "raw": table} `` or ``{"id", "path": file}``, optional ``"sft": true``), prints one
JSON answer per line: ``{"id", "config", "mode", "warnings", "sft_online_eval_keys"}`` or
``{"id", "error"}`` (a file prime cannot read).
"""

import json
import sys


class _Notes:
    def __init__(self):
        self.lines = []

    def print(self, *args, **kwargs):
        self.lines.append(" ".join(str(a) for a in args))


def main():
    protocol = sys.stdout
    sys.stdout = sys.stderr
    import toml
    from prime_cli.commands.rl import _hosted_config, _is_sft, _schema_input
    from prime_cli.utils.training_compiler import SFT_ONLINE_EVAL_KEYS

    for line in sys.stdin:
        request = json.loads(line)
        answer = {"id": request.get("id")}
        try:
            raw = request["raw"] if "raw" in request else toml.load(request["path"])
            notes = _Notes()
            config = _schema_input(_hosted_config(raw, notes))
            answer.update(config=config, mode="sft" if _is_sft(raw, flag=bool(request.get("sft"))) else "rl",
                          warnings=notes.lines, sft_online_eval_keys=sorted(SFT_ONLINE_EVAL_KEYS))
        except Exception as exc:
            answer["error"] = "%s: %s" % (type(exc).__name__, exc)
        protocol.write(json.dumps(answer, default=str) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
