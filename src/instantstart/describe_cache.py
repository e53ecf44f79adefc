"""Cheap status reads: describe results cached for a short interval, concurrent callers coalesced."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

Clock = Callable[[], float]
"""Monotonic seconds (time.monotonic by default; a test injects one it can advance instead of sleeping)."""
DB_READ_SECONDS = 1.0


class DescribeCache:
    """At most one describe call per key per interval, however many browsers and agents poll.

    Concurrent callers of the same key wait on the same in-flight call (single flight); a result is
    reused for `ttl` seconds. Errors are not cached. At most `max_entries` values are kept: expired ones
    are dropped on every store and the least recently used goes first when full. `clock` tells the time.
    """

    def __init__(self, ttl: float, max_entries: int = 1024, clock: Clock = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self.max_entries = max_entries
        self._values: OrderedDict[str, tuple[float, Any, float]] = OrderedDict()  # (stored at, value, kept for)
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self.calls = 0  # describe calls actually made (for tests and metrics)

    async def get(self, key: str, fetch: Callable[[], Awaitable[Any]], ttl: float | None = None) -> Any:
        """The cached value of `key`, or the result of one `fetch()` shared by every concurrent caller;
        `ttl` overrides the interval for this read (e.g. longer while nothing changes the resource)."""
        now = self.clock()
        hit = self._values.get(key)
        if hit is not None and now - hit[0] < (self.ttl if ttl is None else ttl):
            self._values.move_to_end(key)
            return hit[1]
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            self.calls += 1
            value = await fetch()
            self._store(key, value, self.ttl if ttl is None else ttl)
            future.set_result(value)
            return value
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: the waiting callers re-raise it themselves
            raise
        finally:
            self._inflight.pop(key, None)

    def _store(self, key: str, value: Any, ttl: float) -> None:
        now = self.clock()
        self._values.pop(key, None)
        while self._values:
            oldest_key, (stored, _, kept) = next(iter(self._values.items()))
            if now - stored < max(kept, self.ttl) and len(self._values) < self.max_entries:
                break
            del self._values[oldest_key]
        self._values[key] = (now, value, ttl)

    def __len__(self) -> int:
        return len(self._values)

    def invalidate(self, prefix: str = "") -> None:
        """Forget cached values whose key starts with `prefix` (after a mutation)."""
        for key in [k for k in self._values if k.startswith(prefix)]:
            del self._values[key]


class DbReadCache(DescribeCache):
    """The application's cache of status-path database reads (cluster row, active tag, latest operation): the
    same single-flight TTL cache as the describe cache, its own instance and interval (DB_READ_SECONDS), forgotten
    at once when an operation changes."""

    def __init__(self, ttl: float = DB_READ_SECONDS, max_entries: int = 1024, clock: Clock = time.monotonic) -> None:
        super().__init__(ttl, max_entries, clock)
