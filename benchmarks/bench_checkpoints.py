"""Checkpoint downloads, side by side in one run: ``model-factory download-checkpoint`` against the real
``prime volumes get`` (0.18.0) from the same emulator, throughput and peak memory of each, at 200 MB and 2 GB.

    uv run python benchmarks/bench_checkpoints.py [--repeat 3] [--quick]

The emulator runs in its own process (``skill.emulator.serve``, clock frozen, moved by its admin routes),
once per checkpoint size, its checkpoints made of large sparse shards (``StoredFile(sparse=True)``: zeros
between a 4 KiB head and tail, made on demand) plus a small ``.metadata``: 2 GB = 8 x 256 MiB shards, 200 MB =
8 x 25 MiB. Both clients run as commands in a child process each (``os.wait4``: wall time and peak resident
memory of the whole process, Python included), alternately, into a fresh folder removed afterwards; before
the timed runs every object is HEADed once, so the emulator has computed its checksums and neither client
pays for that. Throughput = checkpoint bytes / wall seconds of the command (its start-up included, for both).

Ours verifies every file (MD5 against the store's checksum) and journals its parts; prime does neither.
Goals (issue "Checkpoints"): ours at least as fast; its peak RSS under 150 MB and within 10 MB from 200 MB to
2 GB. Nothing leaves loopback.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._emulator import CONFIG, KEY  # noqa: E402
from tests._conformance import envs  # noqa: E402

TEAM = "cteam00000000000000000001"
MIB = 2**20


def start_emulator(shard_bytes: int, shards: int) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    files = ", ".join(f"StoredFile('trainer/__{i}_0.distcp', {shard_bytes}, sparse=True)" for i in range(shards))
    code = ("from skill.emulator import serve; from skill.emulator.storage import StoredFile; "
            f"serve(port={port}, speed=0, checkpoint_files=(StoredFile('trainer/.metadata', 8192), {files}))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url + "/_emulator/state", timeout=5).raise_for_status()
            return proc, url
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def finished_run(url: str) -> str:
    """A run of the research team on its volume, ended and synced."""
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
    config = tomllib.loads(CONFIG.read_text())
    created = api.post("/api/v1/training/runs", json={"config": config, "name": "bench-ckpt", "teamId": TEAM,
                                                      "volume": "research-data"})
    created.raise_for_status()
    api.post("/_emulator/advance", json={"seconds": 60 + 90 + 30 * 20 + 10 + 15 + 30 + 1}).raise_for_status()
    return created.json()["runId"]


def warm(env: dict[str, str], path: str) -> None:
    """HEAD every object once: the emulator computes (and keeps) each one's MD5, so no timed client pays for it."""
    from tools.core import Context, open_volume

    ctx = Context(env=env, home=Path(env["HOME"]))
    with open_volume(ctx, "research-data", TEAM, path=path) as reader:
        for obj in list(reader.iter_objects(path)):
            reader.head(obj.key)
    ctx.close()


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall seconds, peak RSS in MB, CPU seconds) of ``cmd`` run to its end; SystemExit when it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {err[-2000:]}")
    return seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def md5_rate() -> float:
    """MB/s of hashlib's MD5 on this machine now (what verifying costs ours)."""
    import hashlib

    block, digest = bytes(64 * MIB), hashlib.md5()
    start = time.perf_counter()
    for _ in range(4):
        digest.update(block)
    return 4 * 64 * MIB / 1e6 / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed downloads per client and size (default 3)")
    parser.add_argument("--quick", action="store_true", help="200 MB only, one download each")
    args = parser.parse_args()
    prime = envs.prime_python().parent / "prime"
    ours = [sys.executable, "-m", "skill", "download-checkpoint"]
    sizes = [("200 MB", 25 * MIB, 8)] + ([] if args.quick else [("2 GB", 256 * MIB, 8)])
    repeat = 1 if args.quick else args.repeat
    print("Checkpoint download: model-factory download-checkpoint vs prime volumes get (0.18.0), same emulator,\n"
          f"{repeat} timed download(s) each, alternating; wall time of the whole command, peak RSS of its process\n")
    print(f"{'checkpoint':<12}{'client':<34}{'seconds':>9}{'MB/s':>8}{'range MB/s':>14}{'peak RSS':>11}"
          f"{'CPU s':>8}")
    peaks: dict[str, float] = {}
    for label, shard, shards in sizes:
        proc, url = start_emulator(shard, shards)
        try:
            run_id = finished_run(url)
            path = f"runs/{run_id}/checkpoints/step_20/"
            total = shard * shards + 8192
            with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as tmp:
                home = Path(tmp) / "home"
                home.mkdir()
                env = {**os.environ, "PRIME_API_KEY": KEY, "PRIME_API_BASE_URL": url, "PRIME_TRACES_URL": url,
                       "PRIME_DISABLE_VERSION_CHECK": "1", "HOME": str(home), "PRIME_TEAM_ID": TEAM,
                       "MODEL_FACTORY_STATE_DIR": str(home / "state"), "NO_COLOR": "1"}
                warm(env, path)
                results: dict[str, list[tuple[float, float, float]]] = {"ours": [], "prime": []}
                for i in range(repeat):
                    for kind in (("ours", "prime") if i % 2 == 0 else ("prime", "ours")):
                        dest = Path(tmp) / f"{kind}-{i}"
                        cmd = [*ours, run_id, str(dest), "--json"] if kind == "ours" else \
                            [str(prime), "volumes", "get", "research-data", path, str(dest)]
                        results[kind].append(timed(cmd, env))
                        got = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()
                                  and ".model-factory" not in p.parts)
                        assert got == total, f"{kind} wrote {got} of {total} bytes"
                        shutil.rmtree(dest)
                for kind, name in (("ours", "model-factory download-checkpoint"), ("prime", "prime volumes get")):
                    rates = [total / 1e6 / s for s, _, _ in results[kind]]
                    seconds = statistics.median(s for s, _, _ in results[kind])
                    peak = max(r for _, r, _ in results[kind])
                    cpu = statistics.median(c for _, _, c in results[kind])
                    if kind == "ours":
                        peaks[label] = peak
                    print(f"{label:<12}{name:<34}{seconds:>9.2f}{total / 1e6 / seconds:>8.0f}"
                          f"{f'{min(rates):.0f}-{max(rates):.0f}':>14}{peak:>8.1f} MB{cpu:>8.1f}")
        finally:
            proc.terminate()
            proc.wait()
    print(f"\nMD5 on this machine now: {md5_rate():.0f} MB/s on one core (ours verifies every byte; prime does not).")
    if len(peaks) == 2:
        low, high = peaks["200 MB"], peaks["2 GB"]
        print(f"Ours, peak RSS 200 MB -> 2 GB: {low:.1f} -> {high:.1f} MB ({high - low:+.1f} MB); "
              "goal: under 150 MB, within 10 MB.")


if __name__ == "__main__":
    main()
