"""Request bounds at the ASGI layer: one streamed body-size limit, bounded metric labels, CORS preflight."""

from __future__ import annotations

from typing import Any

from starlette.types import Message, Receive, Scope

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# The sign-in and sign-out forms carry one token or CSRF value; nothing legitimate comes near 16 KiB,
# and these routes answer before any authentication, so they get the small limit.
FORM_PATHS = ("/sign-in", "/sign-out")
FORM_LIMIT = 16 * 1024


class BodyTooLarge(Exception):
    """The request body is larger than the limit for its route."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"larger than {limit} bytes")
        self.limit = limit


def body_limit(path: str, default: int) -> int:
    """The size limit of a request body on `path`."""
    return min(FORM_LIMIT, default) if path in FORM_PATHS else default


def method_label(method: str) -> str:
    """A metrics label for an HTTP method: made-up methods all count as OTHER."""
    return method if method in KNOWN_METHODS else "OTHER"


def declared_length(scope: Scope) -> int | None:
    """The Content-Length a request declares, if it is a valid number."""
    for key, value in scope.get("headers", []):
        if key.lower() == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() and len(text) < 20 else -1
    return None


async def buffer_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """Read the request body chunk by chunk, stopping as soon as it exceeds `limit`.

    Returns (body, more_body_was_refused). At most `limit` plus one chunk is ever held in memory.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"", True
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive callable that yields the buffered body once, then defers to the real one."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: Any = await receive()
        return message  # type: ignore[no-any-return]

    return replayed


def is_preflight(scope: Scope, headers: dict[str, str]) -> bool:
    """Whether a request is a CORS preflight."""
    return (
        scope.get("method") == "OPTIONS" and "origin" in headers and "access-control-request-method" in headers
    )
