"""WebSocket bounds against the served app with real clients: sockets per client and in all (close 4429 with the
limit named), a slot freed when a socket closes, and a reader that stops reading dropped (close 4408) instead of
its events piling up without limit."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.support.servers import Running, thread_server
from tests.support.waits import until

FLOOD = 5000  # refreshes; their snapshots (~80 bytes) fill the client's window, the server's small send buffers,
# then its queue of 4


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Running]:
    with thread_server(tmp_path / "data", f"sqlite:///{tmp_path / 'state.db'}", send_buffer=4096,
                       ws_sockets_per_client=2, ws_sockets=3, ws_queue_size=4) as running:
        yield running


def ws_url(server: Running) -> str:
    return server.url.replace("http://", "ws://") + "/api/v1/ws"


def bearer(server: Running, **kwargs: Any) -> ClientConnection:
    return connect(ws_url(server), additional_headers={"Authorization": f"Bearer {server.token}"}, open_timeout=60,
                   **kwargs)


def session_cookie(server: Running) -> str:
    """A fresh browser session (each sign-in is another client)."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.post("/sign-in", data={"token": server.token}, headers={"Origin": server.url}).status_code == 303
        return f"instantstart_session={client.cookies['instantstart_session']}"


def hello(conn: ClientConnection) -> bool:
    return bool(json.loads(conn.recv(timeout=60))["type"] == "hello")


def closed_with(conn: ClientConnection) -> tuple[int | None, str]:
    """Read until the server closes; its close code and reason."""
    with pytest.raises(ConnectionClosed) as caught:
        while True:
            conn.recv(timeout=60)
    rcvd = caught.value.rcvd
    return (rcvd.code, rcvd.reason) if rcvd else (None, "")


def metric(server: Running, reason: str) -> float:
    text = httpx.get(server.url + "/metrics", timeout=30).text
    found = re.search(rf'instantstart_websockets_bounded_total{{kind="event sockets",reason="{reason}"}} (\S+)', text)
    return float(found.group(1)) if found else 0.0


def browser(server: Running) -> ClientConnection:
    """An event socket of a new browser session (another client)."""
    return connect(ws_url(server), additional_headers={"Cookie": session_cookie(server)}, origin=server.url,
                   open_timeout=60)


def test_sockets_are_bounded_per_client_and_in_all(server: Running) -> None:
    with contextlib.ExitStack() as held:
        first, second = held.enter_context(bearer(server)), held.enter_context(bearer(server))
        assert hello(first) and hello(second)
        with bearer(server) as third:  # the same client (one address, the shared token): over its 2
            code, reason = closed_with(third)
        assert code == 4429 and "for this client (limit 2)" in reason, (code, reason)
        with connect(ws_url(server), additional_headers={"Authorization": f"Bearer {server.token}",
                                                         "Cookie": "instantstart_session=made-up"},
                     open_timeout=60) as disguised:  # a made-up cookie beside the token is no other client
            code, reason = closed_with(disguised)
        assert code == 4429 and "for this client (limit 2)" in reason, (code, reason)
        assert hello(held.enter_context(browser(server)))  # another client: its own allowance, the server's third
        with browser(server) as fourth:
            code, reason = closed_with(fourth)
        assert code == 4429 and "on this server (limit 3)" in reason, (code, reason)
        assert metric(server, "too_many") == 3
        second.close()

        def reopened() -> bool:
            with bearer(server) as conn:
                try:
                    return hello(conn)
                except ConnectionClosed:
                    return False

        until(reopened, "a slot freed by the closed socket", timeout=30)


class RawSocket:
    """A WebSocket client on a bare socket (RFC 6455 framing by hand) that can send without ever reading, which
    the client libraries cannot: their one connection lock stalls sends while their reading is paused."""

    def __init__(self, server: Running) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # small windows both ways: sends back up
        host, port = server.url.removeprefix("http://").split(":")
        self.sock.connect((host, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /api/v1/ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                           f"Authorization: Bearer {server.token}\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(4096)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def send_text(self, text: str) -> None:
        payload, mask = text.encode(), os.urandom(4)
        assert len(payload) < 126
        self.sock.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4]
                                                                            for i, b in enumerate(payload)))

    def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed without a close frame")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def close_frame(self) -> tuple[int, str]:
        """Read (now) until the server's close frame; its code and reason."""
        self.sock.settimeout(60)
        while True:
            first, second = self._take(2)
            size = second & 0x7F
            if size == 126:
                size = struct.unpack("!H", self._take(2))[0]
            elif size == 127:
                size = struct.unpack("!Q", self._take(8))[0]
            payload = self._take(size)
            if first & 0x0F == 0x8:
                return struct.unpack("!H", payload[:2])[0], payload[2:].decode()


def test_a_reader_that_stops_reading_is_dropped(server: Running) -> None:
    raw = RawSocket(server)
    for sent in range(1, FLOOD + 1):  # each refresh queues one snapshot; nothing is read
        raw.send_text(json.dumps({"type": "refresh"}))
        if sent % 100 == 0 and metric(server, "too_slow") >= 1:
            break
    else:
        until(lambda: metric(server, "too_slow") >= 1, "the unread socket dropped", timeout=60)
    code, reason = raw.close_frame()
    assert code == 4408 and "events were waiting unread" in reason, (code, reason)
    raw.sock.close()
    with bearer(server) as again:  # its slot is free again
        assert hello(again)
