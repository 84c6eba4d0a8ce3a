"""Whole-run trace downloads, side by side in one run: ``mf_download_traces`` against a plain httpx
client making the same requests with the same concurrency, and the download process's peak memory
as runs grow in traces and in bytes.

    uv run python benchmarks/bench_traces.py [--repeat 5] [--concurrency 8] [--quick]

The emulator runs in its own process (``skill.emulator.serve``, clock frozen and moved by its
admin routes), so the download process holds only the client. Every download runs in a fresh
child process that reports its wall time and its peak resident memory
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``: the whole process, Python included). Throughput is
a steady-state figure: before its timed download each child makes the same kind of download of a
20-trace run (its own client, into a folder removed afterwards), so that importing modules and
first-call set-up fall outside the clock for both clients; that warm-up's time is printed too.

1. Throughput on a run of 2,000 traces x 100 kB (200 MB), with and without episode envelopes:
   ``ours`` (``registry.call_tool("mf_download_traces")``: listing, atomic writes, sha256,
   manifest, resume index), ``plain`` (httpx.Client, the same listing pages and the same
   ``GET /traces/{id}?raw=true`` / ``GET /episodes/{id}?raw=true`` requests, same thread count,
   each body streamed into ``traces/<id>.json``), and ``read only`` (plain, bodies discarded).
   Goal: ours >= 80% of plain.
2. Peak memory of ours (and of plain, for reference) at 2,000 / 10,000 / 50,000 traces of 10 kB
   and at 5 GB (2,000 traces x 2.5 MB). Goal: under 80 MB, flat.

Written files go to a temporary folder and are removed after each download. Nothing leaves loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._emulator import KEY, Emulator  # noqa: E402

# -- the downloads, each in a child process --------------------------------------------------------


def child_ours(url: str, run_id: str, dest: Path, concurrency: int, episodes: bool) -> dict[str, Any]:
    from skill import registry
    from tools.core import Context

    env = {"PRIME_API_KEY": KEY, "PRIME_API_BASE_URL": url, "PRIME_TRACES_URL": url, "HOME": str(dest.parent)}
    ctx = Context(env=env, home=dest.parent, state_dir=dest.parent / "state")
    start = time.perf_counter()
    result = registry.call_tool("mf_download_traces", {"run_id": run_id, "dest": str(dest), "concurrency": concurrency,
                                                       "include_episodes": episodes}, ctx)
    seconds = time.perf_counter() - start
    data = result.model_dump()
    if data.get("error"):
        raise SystemExit(f"download failed: {data}")
    files = data["traces_on_disk"] + data["episodes_on_disk"]
    return {"seconds": seconds, "bytes": data["written_bytes"], "files": files, "complete": data["complete"]}


def _pages(client: httpx.Client, path: str, run_id: str) -> Iterator[str]:
    cursor = None
    while True:
        page = client.get(path, params={"run_id": run_id, "limit": 100, **({"cursor": cursor} if cursor else {})})
        page.raise_for_status()
        body = page.json()
        yield from (item["trace_id" if path == "/traces" else "episode_id"] for item in body["items"])
        cursor = body.get("next_cursor")
        if not cursor:
            return


def child_plain(url: str, run_id: str, dest: Path, concurrency: int, episodes: bool, write: bool) -> dict[str, Any]:
    """A plain httpx client: the same listing pages and raw-document requests, the same number of threads and at
    most twice as many requests in flight; each body streamed into its file (or discarded)."""
    client = httpx.Client(base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
    totals = {"bytes": 0, "files": 0}
    lock = threading.Lock()

    def fetch(path: str, target: Path) -> None:
        size = 0
        with client.stream("GET", path, params={"raw": "true"}) as response:
            response.raise_for_status()
            if write:
                with target.open("wb") as handle:
                    for chunk in response.iter_bytes():
                        handle.write(chunk)
                        size += len(chunk)
            else:
                for chunk in response.iter_bytes():
                    size += len(chunk)
        with lock:
            totals["bytes"] += size
            totals["files"] += 1

    start = time.perf_counter()
    kinds = [("/traces", "traces")] + ([("/episodes", "episodes")] if episodes else [])
    with ThreadPoolExecutor(concurrency) as pool:
        for list_path, folder in kinds:
            (dest / folder).mkdir(parents=True, exist_ok=True)
            pending: set = set()
            for identifier in _pages(client, list_path, run_id):
                while len(pending) >= 2 * concurrency:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        future.result()
                pending.add(pool.submit(fetch, f"{list_path}/{identifier}", dest / folder / f"{identifier}.json"))
            for future in pending:
                future.result()
    seconds = time.perf_counter() - start
    client.close()
    return {"seconds": seconds, **totals, "complete": True}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _one(kind: str, url: str, run_id: str, dest: Path, concurrency: int, episodes: bool) -> dict[str, Any]:
    if kind == "ours":
        return child_ours(url, run_id, dest, concurrency, episodes)
    return child_plain(url, run_id, dest, concurrency, episodes, write=kind == "plain")


def child_main(argv: list[str]) -> None:
    kind, url, run_id, dest, concurrency, episodes, warm_run = argv[0], argv[1], argv[2], Path(argv[3]), \
        int(argv[4]), argv[5] == "1", argv[6]
    warm_up = None
    if warm_run != "-":  # the same kind of download of a small run first: imports and first-call set-up
        warm = dest.parent / "warm-up"
        warm_up = _one(kind, url, warm_run, warm, concurrency, episodes)["seconds"]
        shutil.rmtree(warm)
    cpu = _cpu()
    out = _one(kind, url, run_id, dest, concurrency, episodes)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["cpu_seconds"] = _cpu() - cpu
    out["warm_up_seconds"] = warm_up
    print(json.dumps(out))


def download(kind: str, url: str, run_id: str, concurrency: int, episodes: bool,
             warm_run: str | None = None) -> dict[str, Any]:
    """One download in a fresh child process, into a temporary folder removed afterwards; ``warm_run``: a
    small run the child downloads first, outside the clock."""
    work = Path(tempfile.mkdtemp(prefix="mf-bench-traces-"))
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", kind, url, run_id, str(work / "dest"),
                               str(concurrency), "1" if episodes else "0", warm_run or "-"],
                              capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            raise SystemExit(f"{kind} download failed:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- printing ---------------------------------------------------------------------------------------


def mb_per_s(result: dict[str, Any]) -> float:
    return result["bytes"] / result["seconds"] / 1e6


def interleaved(kinds: list[str], url: str, run_id: str, warm_run: str, concurrency: int, episodes: bool,
                repeat: int) -> dict[str, dict[str, Any]]:
    """``repeat`` downloads of each kind, taken in turns (ours, plain, read, ours, ...) so that a change in the
    machine's load falls on all of them; per kind the median run (by seconds), with every run's throughput."""
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    for _ in range(repeat):
        for kind in kinds:
            runs[kind].append(download(kind, url, run_id, concurrency, episodes, warm_run))
    out = {}
    for kind, results in runs.items():
        warm_ups = sorted(r["warm_up_seconds"] for r in results)
        results.sort(key=lambda r: r["seconds"])
        out[kind] = {**results[len(results) // 2], "range": (min(map(mb_per_s, results)), max(map(mb_per_s, results))),
                     "warm_up_seconds": warm_ups[len(warm_ups) // 2]}
    return out


def throughput(emu: Emulator, concurrency: int, repeat: int) -> None:
    run_id = emu.finished_run("many_traces", count=2000, trace_bytes=100_000)
    warm_run = emu.finished_run("many_traces", count=20, trace_bytes=100_000)
    print(f"\n1. Throughput: 2,000 traces x 100 kB (200 MB), {concurrency} concurrent requests, median of {repeat} "
          "(min-max MB/s)\n")
    print(f"{'episodes':<10}{'client':<34}{'seconds':>8}{'MB/s':>9}   {'range':<13}{'files':>7}{'peak RSS':>10}"
          f"{'ours vs':>10}")
    for episodes in (True, False):
        rows = [("ours (mf_download_traces)", "ours"), ("plain httpx, writing files", "plain"),
                ("plain httpx, reading only", "read")]
        results = interleaved([kind for _, kind in rows], emu.url, run_id, warm_run, concurrency, episodes, repeat)
        for label, kind in rows:
            r = results[kind]
            ratio = "" if kind == "ours" else f"{mb_per_s(results['ours']) / mb_per_s(r):.0%}"
            low, high = r["range"]
            print(f"{'with' if episodes else 'without':<10}{label:<34}{r['seconds']:>8.2f}{mb_per_s(r):>9.1f}   "
                  f"{f'{low:.0f}-{high:.0f}':<13}{r['files']:>7}{r['peak_rss_mb']:>8.1f} MB{ratio:>10}")
        print(f"{'':<10}warm-up (first download in a fresh process, 20 traces, not timed above): "
              + ", ".join(f"{kind} {results[kind]['warm_up_seconds']:.2f} s" for _, kind in rows))
        goal = mb_per_s(results["ours"]) / mb_per_s(results["plain"])
        print(f"{'':<10}goal: ours >= 80% of plain httpx writing the same files: "
              f"{goal:.0%} {'met' if goal >= 0.8 else 'NOT met'}")


def memory(emu: Emulator, concurrency: int, quick: bool) -> None:
    sizes = [(2000, 10_000), (10_000, 10_000)] + ([] if quick else [(50_000, 10_000), (2000, 2_500_000)])
    print(f"\n2. Peak memory of the download process (RSS, whole process), with episodes, {concurrency} concurrent\n")
    print(f"{'run':<34}{'ours':>10}{'plain httpx':>14}{'ours MB/s':>11}{'plain MB/s':>12}{'complete':>10}")
    peaks = []
    for count, trace_bytes in sizes:
        run_id = emu.finished_run("many_traces", count=count, trace_bytes=trace_bytes)
        ours = download("ours", emu.url, run_id, concurrency, True)
        plain = download("plain", emu.url, run_id, concurrency, True)
        peaks.append(ours["peak_rss_mb"])
        label = f"{count:,} traces x {trace_bytes / 1000:g} kB ({count * trace_bytes / 1e9:.2g} GB)"
        print(f"{label:<34}{ours['peak_rss_mb']:>7.1f} MB{plain['peak_rss_mb']:>11.1f} MB{mb_per_s(ours):>11.1f}"
              f"{mb_per_s(plain):>12.1f}{str(ours['complete']):>10}")
    spread = max(peaks) - min(peaks)
    print(f"goal: ours < 80 MB at every size, flat: max {max(peaks):.1f} MB, spread {spread:.1f} MB -> "
          f"{'met' if max(peaks) < 80 else 'NOT met'}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="downloads per throughput figure (median kept)")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent requests of both clients")
    parser.add_argument("--quick", action="store_true", help="memory at 2,000 and 10,000 traces only")
    parser.add_argument("--only", choices=["throughput", "memory"], help="run one part")
    args = parser.parse_args()
    emu = Emulator()
    try:
        print(f"Python {sys.version.split()[0]}, httpx {httpx.__version__}, {os.cpu_count()} CPUs; emulator pid "
              f"{emu.proc.pid} (its own process)")
        if args.only != "memory":
            throughput(emu, args.concurrency, args.repeat)
        if args.only != "throughput":
            memory(emu, args.concurrency, args.quick)
    finally:
        emu.close()


if __name__ == "__main__":
    main()
