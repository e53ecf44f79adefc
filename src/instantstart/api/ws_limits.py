"""WebSocket bounds: open sockets per client and overall, per-socket send queues that drop a slow reader."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import Counter
from typing import Any

from fastapi import WebSocket

from instantstart.web.sessions import SESSION_COOKIE, cookie_value

# Close codes (4000-4999 are the application's; 4401 is the Gate's "not authenticated").
CLOSE_TOO_MANY = 4429  # as HTTP 429: this client (or the server) has as many sockets open as allowed
CLOSE_TOO_SLOW = 4408  # the client did not read its messages: its queue filled, or a send stalled
SEND_SECONDS = 30.0  # longest one message may take to leave before the reader counts as stalled
CLOSE_SECONDS = 5.0  # a close handshake with a reader that does not read is not waited for longer


def client_key(socket: WebSocket) -> str:
    """Who opened the socket: a bearer caller by its address (one API token is shared by every bearer client, so
    the address tells them apart; a cookie it may also send is not what the Gate checked, so it cannot mint new
    clients), else the browser session the Gate admitted (its cookie; kept as a digest only)."""
    sid = cookie_value(socket.headers.get("cookie"), SESSION_COOKIE)
    if sid and not socket.headers.get("authorization"):
        return "session:" + hashlib.sha256(sid.encode()).hexdigest()[:16]
    return "peer:" + (socket.client.host if socket.client else "unknown")


class SocketSlots:
    """Counts the open sockets of one kind, per client and in all (the event loop's thread only)."""

    def __init__(self, what: str, per_client: int, total: int) -> None:
        self.what = what
        self.per_client = per_client
        self.total = total
        self.open: Counter[str] = Counter()
        self.closed: Counter[str] = Counter()  # sockets closed by a bound, by reason (for /metrics)

    def acquire(self, client: str) -> str | None:
        """Take a slot for `client`: None when granted, else the close reason (which limit, and the fix)."""
        reason = None
        if self.open[client] >= self.per_client:
            reason = f"Too many {self.what} for this client (limit {self.per_client}); close one and retry."
        elif sum(self.open.values()) >= self.total:
            reason = f"Too many {self.what} on this server (limit {self.total}); retry later."
        if reason is not None:
            self.closed["too_many"] += 1
            return reason
        self.open[client] += 1
        return None

    def dropped_slow(self) -> None:
        """Count a socket closed because its reader was too slow."""
        self.closed["too_slow"] += 1

    def release(self, client: str) -> None:
        """Give back a slot taken by `acquire`."""
        self.open[client] -= 1
        if self.open[client] <= 0:
            del self.open[client]


class Outbox:
    """One socket's bounded send queue: when it is full the reader is too slow and is dropped (never buffered
    without limit, never silently thinned)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(size)
        self.overflow = asyncio.Event()

    def offer(self, event: dict[str, Any]) -> None:
        """Queue an event, or mark the socket too slow when `size` events are already waiting."""
        if self.overflow.is_set():
            return
        if self.queue.full():
            self.overflow.set()
            return
        self.queue.put_nowait(event)


async def refuse(socket: WebSocket, reason: str) -> None:
    """Accept, then close at once with CLOSE_TOO_MANY and `reason` (a refusal before accept reaches a browser as
    a bare HTTP 403, without the reason)."""
    await socket.accept()
    await close(socket, CLOSE_TOO_MANY, reason)


async def close(socket: WebSocket, code: int, reason: str) -> None:
    """Close with `code` and `reason` (at most 123 bytes), not waiting long on a peer that does not read."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(socket.close(code=code, reason=reason[:120]), CLOSE_SECONDS)


async def send(socket: WebSocket, message: dict[str, Any], slots: SocketSlots, outbox: Outbox | None = None) -> bool:
    """Send one message. False when the reader is too slow (the socket then closed with CLOSE_TOO_SLOW): the send
    stalled SEND_SECONDS, or `outbox` overflowed while it waited (a reader that stopped reading blocks the send)."""
    sending = asyncio.ensure_future(socket.send_json(message))
    overflow = asyncio.ensure_future(outbox.overflow.wait()) if outbox is not None else None
    waits: set[asyncio.Future[Any]] = {sending} if overflow is None else {sending, overflow}
    await asyncio.wait(waits, timeout=SEND_SECONDS, return_when=asyncio.FIRST_COMPLETED)
    if overflow is not None:
        overflow.cancel()
    if sending.done():
        sending.result()  # a disconnect surfaces here
        return True
    sending.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await sending
    await too_slow(socket, slots, outbox)
    return False


async def too_slow(socket: WebSocket, slots: SocketSlots, outbox: Outbox | None) -> None:
    """Count, then close a socket whose reader is too slow with CLOSE_TOO_SLOW, saying which bound it hit."""
    slots.dropped_slow()
    if outbox is not None and outbox.overflow.is_set():
        reason = f"{outbox.size} events were waiting unread; reconnect and read faster."
    else:
        reason = f"A message could not be sent in {SEND_SECONDS:.0f} s; reconnect and read faster."
    await close(socket, CLOSE_TOO_SLOW, reason)
