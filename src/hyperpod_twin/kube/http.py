"""A threaded HTTP/1.1 server with keep-alive and chunked streaming, for the twin's Kubernetes API.

One thread per connection (ThreadingHTTPServer) keeps long watches and `logs -f` streams independent
of each other and of ordinary requests; streamed bodies use chunked transfer encoding, as
kube-apiserver does, and stop when the client goes away or the server shuts down.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger(__name__)


@dataclass
class Request:
    """One HTTP request as the API layer sees it."""

    method: str
    path: str  # decoded path without query
    raw_path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes
    identity: Any = None

    def param(self, name: str, default: str = "") -> str:
        """The last value of a query parameter."""
        values = self.query.get(name)
        return values[-1] if values else default

    def flag(self, name: str) -> bool:
        """A boolean query parameter (true/1)."""
        return self.param(name).lower() in ("true", "1")

    @property
    def content_type(self) -> str:
        """The media type of the body, without parameters."""
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


@dataclass
class Response:
    """A full body, or a stream of chunks (b"" chunks are heartbeats: nothing is written)."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterator[bytes] | None = None

    @classmethod
    def json(cls, status: int, obj: Any, headers: dict[str, str] | None = None) -> Response:
        """A JSON response."""
        return cls(status, json.dumps(obj, separators=(",", ":")).encode(), headers=headers or {})


Handler = Callable[[Request], Response]


def client_gone(sock: socket.socket) -> bool:
    """Whether the peer went away while we stream to it.

    Clients send nothing on a connection while reading a streamed response (no pipelining), so a
    readable socket means EOF or a TLS close_notify: either way the stream is over."""
    try:
        readable, _, _ = select.select([sock.fileno()], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as Kubernetes' Go server has: headers and body are two writes, and with Nagle's algorithm the
    # body waited for the client's delayed ACK of the headers, 40 ms on every request.
    disable_nagle_algorithm = True
    # An idle keep-alive connection is closed after this long, so its thread does not live forever;
    # streams only write, so a long quiet watch is unaffected.
    timeout = 600
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        split = urlsplit(self.path)
        request = Request(
            method=self.command,
            path=unquote(split.path),
            raw_path=split.path,
            query=parse_qs(split.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=self._read_body(),
        )
        try:
            response = self.server.app(request)
        except Exception:
            log.exception("unhandled error serving %s %s", self.command, self.path)
            response = Response.json(
                500,
                {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": "internal error", "reason": "InternalError", "code": 500},
            )
        self._send(response)

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in response.headers.items():
            self.send_header(key, value)
        if response.stream is None:
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(response.body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            for chunk in response.stream:
                if self.server.stopping.is_set():
                    break
                if chunk:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                elif client_gone(self.connection):
                    break
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        except Exception:
            # Headers are out: all that is left is to cut the stream so the client notices.
            log.exception("stream for %s %s failed", self.command, self.path)
            self.close_connection = True
        finally:
            close = getattr(response.stream, "close", None)
            if close is not None:
                close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Hundreds of informers (re)connect at once after a cut: the default backlog of 5 drops their SYNs and
    # each dropped client waits a TCP retransmission (1 s, 3 s, …) before it is even accepted.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], app: Handler, tls: ssl.SSLContext | None,
                 accept: Callable[[str], bool] | None = None) -> None:
        self.app = app
        self.stopping = threading.Event()
        self.tls = tls
        self.accept = accept
        super().__init__(address, _RequestHandler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """A connection from an address `accept` refuses is closed unanswered (a security group's drop)."""
        return self.accept is None or self.accept(str(client_address[0]))

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake runs here, in the connection's own thread, so a slow client never
        # holds up the accept loop.
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        try:
            tls_socket = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as err:
            log.debug("TLS handshake with %s failed: %s", client_address, err)
            return
        try:
            super().finish_request(tls_socket, client_address)
        finally:
            # wrap_socket detached the raw socket, so the TLS socket is the one to close.
            tls_socket.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops or garbles its TLS connection mid-request (a watch closed while its read was
        pending) is the client's business: a debug line, not socketserver's traceback on stderr."""
        error = sys.exc_info()[1]
        if isinstance(error, (ssl.SSLError, ConnectionError)):
            log.debug("connection from %s ended: %s", client_address, error)
            return
        super().handle_error(request, client_address)


class HttpServer:
    """Serve `app` on host:port (0 picks a free port) from a background thread."""

    def __init__(
        self,
        app: Handler,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str = "kube-api",
        tls: ssl.SSLContext | None = None,
        accept: Callable[[str], bool] | None = None,
    ) -> None:
        self._server = _Server((host, port), app, tls, accept)
        self.scheme = "https" if tls is not None else "http"
        self._thread: threading.Thread | None = None
        self._name = name

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        """The bound host."""
        return str(self._server.server_address[0])

    @property
    def stopping(self) -> threading.Event:
        """Set when the server shuts down; streams watch it to end."""
        return self._server.stopping

    def start(self) -> None:
        """Start accepting connections."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name=self._name, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, end streams, close the socket."""
        self._server.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
