"""The describe cache's per-read interval (a value read with a longer interval outlives the default one), its
injected clock, and the database-read cache built on it."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

from instantstart.describe_cache import DB_READ_SECONDS, DbReadCache, DescribeCache


def test_a_value_kept_longer_than_the_default_interval_survives_other_keys_being_stored() -> None:
    calls: Counter[str] = Counter()

    def fetcher(key: str) -> Callable[[], Awaitable[str]]:
        async def fetch() -> str:
            calls[key] += 1
            return key

        return fetch

    async def run() -> None:
        cache = DescribeCache(0.0)  # the default interval: nothing is reused
        assert await cache.get("idle-cluster", fetcher("idle-cluster"), ttl=300.0) == "idle-cluster"
        await cache.get("other", fetcher("other"))  # storing another key must not evict the long-lived one
        await cache.get("idle-cluster", fetcher("idle-cluster"), ttl=300.0)
        await cache.get("other", fetcher("other"))
        # A shorter interval at read time (an operation started) applies at once.
        await cache.get("idle-cluster", fetcher("idle-cluster"), ttl=0.0)

    asyncio.run(run())
    assert calls == Counter({"idle-cluster": 2, "other": 2})


def test_the_interval_is_measured_by_the_injected_clock() -> None:
    now = [100.0]
    calls: Counter[str] = Counter()

    async def fetch() -> str:
        calls["k"] += 1
        return "v"

    async def run() -> None:
        cache = DescribeCache(5.0, clock=lambda: now[0])
        await cache.get("k", fetch)
        now[0] += 4.9
        await cache.get("k", fetch)  # still fresh by the injected clock, however long the test really took
        assert calls["k"] == 1
        now[0] += 0.1
        await cache.get("k", fetch)  # expired by the injected clock, with no sleep
        assert calls["k"] == 2

    asyncio.run(run())


def test_the_database_read_cache_is_its_own_type_with_its_own_interval() -> None:
    reads = DbReadCache()
    assert isinstance(reads, DescribeCache) and type(reads) is not DescribeCache
    assert reads.ttl == DB_READ_SECONDS == 1.0
