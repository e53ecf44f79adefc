"""REST reads: one JSON encoding per result object, a strong ETag, If-None-Match parsing."""

from __future__ import annotations

import json

from pydantic import Field
from starlette.requests import Request

from instantstart.api.rest import encoded, if_none_match
from instantstart.catalog.base import WireModel


class _Result(WireModel):
    node_count: int = Field(description="nodes")


def _request(header: str | None) -> Request:
    headers = [(b"if-none-match", header.encode())] if header is not None else []
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers, "query_string": b""})


def test_the_same_result_object_is_encoded_once_and_keeps_its_etag() -> None:
    first = _Result(node_count=3)
    body, etag = encoded("test_read", first)
    assert json.loads(body) == {"nodeCount": 3}  # camelCase, as the schema says
    again_body, again_etag = encoded("test_read", first)
    assert again_body is body and again_etag == etag  # reused, not re-encoded
    equal_body, equal_etag = encoded("test_read", _Result(node_count=3))
    assert equal_body == body and equal_etag == etag  # same content, same tag
    _, changed = encoded("test_read", _Result(node_count=4))
    assert changed != etag and changed.startswith('"') and changed.endswith('"')


def testif_none_match_lists_tags_weak_ones_by_their_opaque_part() -> None:
    assert if_none_match(_request(None)) == set()
    assert if_none_match(_request('"a", W/"b" ,"c"')) == {'"a"', '"b"', '"c"'}
