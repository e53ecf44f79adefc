"""The describe cache's per-read interval: a value read with a longer interval outlives the default one."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

from instantstart.describe_cache import DescribeCache


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
