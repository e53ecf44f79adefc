"""Every page of a paginated AWS list call (botocore's paginators), failures translated once."""

from __future__ import annotations

from typing import Any

from instantstart.aws.errors import call


def collect(action: str, client: Any, operation: str, key: str, **kwargs: Any) -> list[Any]:
    """The items under `key` of every page of `operation` (its NextToken/nextToken/Marker followed to the end)."""

    def pages() -> list[dict[str, Any]]:
        return list(client.get_paginator(operation).paginate(**kwargs))

    return [item for page in call(action, pages) for item in page.get(key, [])]
