"""Where the test suite's time goes: a pytest log's `--durations` lines summed per file, directory and xdist worker.

Run: .venv/bin/python bench/suite_durations.py LOG [--workers N] [--top K] [--write tests/durations.json]

LOG is the output of a run with `--durations=0` (every test; `make pytest` prints those of 1 s and more); with
`-v` under xdist the `[gwN] ... PASSED tests/...` lines also give each worker's share. The figures: seconds per
file (setup + call + teardown), the files' sum, the longest file, and the wall time N workers would need if whole
files went longest-first to whichever worker is free (the order tests/support/schedule.py gives them). `--write`
records the per-file seconds that ordering reads.
"""

from __future__ import annotations

import argparse
import heapq
import json
import re
from collections import defaultdict
from pathlib import Path

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call|teardown)\s+(\S+?\.py)(?:::|\s|$)")
WORKER = re.compile(r"^\[(gw\d+)\]\s+\[\s*\d+%\]\s+\w+\s+(\S+?\.py)::")


def parse(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """Seconds per test file, and the worker that ran each file (when the log names workers)."""
    seconds: dict[str, float] = defaultdict(float)
    workers: dict[str, str] = {}
    for line in text.splitlines():
        if match := DURATION.match(line):
            seconds[match.group(3)] += float(match.group(1))
        elif match := WORKER.match(line):
            workers.setdefault(match.group(2), match.group(1))
    return dict(seconds), workers


def longest_first_wall(seconds: dict[str, float], workers: int) -> float:
    """The wall time of whole files handed longest-first to whichever of `workers` is free first."""
    loads = [0.0] * workers
    for value in sorted(seconds.values(), reverse=True):
        heapq.heapreplace(loads, loads[0] + value)
    return max(loads)


def report(seconds: dict[str, float], workers: dict[str, str], n_workers: int, top: int) -> str:
    """The summary printed for a log."""
    total = sum(seconds.values())
    lines = [f"{len(seconds)} files, {total:.1f} s of setup+call+teardown"]
    lines.append(f"{'seconds':>9}  file")
    for name, value in sorted(seconds.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{value:9.1f}  {name}")
    by_dir: dict[str, float] = defaultdict(float)
    for name, value in seconds.items():
        by_dir[str(Path(name).parent)] += value
    ranked = sorted(by_dir.items(), key=lambda kv: -kv[1])
    lines.append("per directory: " + ", ".join(f"{d} {v:.0f} s" for d, v in ranked))
    if workers:
        per_worker: dict[str, float] = defaultdict(float)
        for name, worker in workers.items():
            per_worker[worker] += seconds.get(name, 0.0)
        lines.append("per worker: " + ", ".join(f"{w} {v:.0f} s" for w, v in sorted(per_worker.items())))
    if seconds:
        lines.append(
            f"{n_workers} workers: at least {max(total / n_workers, max(seconds.values())):.0f} s; "
            f"longest-first by file {longest_first_wall(seconds, n_workers):.0f} s"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--write", type=Path, help="record the per-file seconds (JSON) for the test ordering")
    args = parser.parse_args()
    seconds, workers = parse(args.log.read_text(errors="replace"))
    print(report(seconds, workers, args.workers, args.top))
    if args.write is not None:
        files = {name: round(value, 1) for name, value in sorted(seconds.items(), key=lambda kv: -kv[1])}
        args.write.write_text(json.dumps({"source": args.log.name, "files": files}, indent=1) + "\n")
        print(f"wrote {len(files)} files to {args.write}")


if __name__ == "__main__":
    main()
