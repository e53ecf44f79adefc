"""Benchmark: how fast the operations store records operations and answers idempotent replays.

Run: .venv/bin/python bench/bench_operations.py [N]   (SQLite in a temp dir; prints the figures)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from instantstart.operations.kinds import OperationKind, StageSpec
from instantstart.operations.store import OperationStore
from instantstart.store.db import Database


async def _noop(_stage: object) -> None:
    return None


def main(n: int) -> None:
    kind = OperationKind(name="bench", stages=(StageSpec("one", _noop), StageSpec("two", _noop)))  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'bench.db'}")
        db.migrate()
        store = OperationStore(db)
        started = time.perf_counter()
        for i in range(n):
            store.submit(kind, {"i": i}, target=f"t{i}", idempotency_key=f"k{i}")
        submit = time.perf_counter() - started
        started = time.perf_counter()
        for i in range(n):
            store.submit(kind, {"i": i}, target=f"t{i}", idempotency_key=f"k{i}")
        replay = time.perf_counter() - started
        started = time.perf_counter()
        pages = 0
        offset = 0
        while True:
            items, total = store.list_operations(limit=100, offset=offset)
            pages += 1
            offset += len(items)
            if offset >= total:
                break
        listing = time.perf_counter() - started
        db.dispose()
    print(f"operations: {n}")
    print(f"submit:  {submit / n * 1000:.2f} ms each ({n / submit:.0f}/s)")
    print(f"replay:  {replay / n * 1000:.2f} ms each ({n / replay:.0f}/s) [same idempotency key]")
    print(f"list:    {listing * 1000:.1f} ms for {pages} pages of 100")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
