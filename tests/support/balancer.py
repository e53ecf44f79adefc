"""A small TCP load balancer for replica tests: round-robins each new connection over the backends, skips a
backend that refuses the connection (a dead replica) and splices bytes both ways, so HTTP, WebSocket upgrades
and MCP's streamable HTTP pass through unchanged. It runs its own asyncio loop in a daemon thread."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Balancer:
    """Round-robin TCP proxy on 127.0.0.1. `routes` maps each accepted client's (host, port) to the backend
    port it was spliced to, so a test can tell which replica a connection landed on."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.port = 0
        self.routes: dict[tuple[str, int], int] = {}
        self.skipped = 0  # connections that found a backend refusing and moved on to the next
        self._next = itertools.cycle(range(len(backends)))
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="balancer", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the balancer did not start")

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def backend_of(self, client: tuple[str, int]) -> int | None:
        """The backend port the connection from `client` (its local address) was spliced to."""
        with self._lock:
            return self.routes.get(client)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    async def _connect(self) -> tuple[int, asyncio.StreamReader, asyncio.StreamWriter] | None:
        """The next backend in turn that accepts a connection; None when every one refuses."""
        for _ in range(len(self.backends)):
            with self._lock:
                port = self.backends[next(self._next)]
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                self.skipped += 1
                continue
            return port, reader, writer
        return None

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        backend = await self._connect()
        if backend is None:
            client_writer.close()
            return
        port, reader, writer = backend
        peer = client_writer.get_extra_info("peername")
        with self._lock:
            self.routes[(str(peer[0]), int(peer[1]))] = port
        await asyncio.gather(_pipe(client_reader, writer), _pipe(reader, client_writer))


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until either side closes, then close the sink (the other direction ends with it)."""
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            sink.close()


@contextmanager
def balancer(backends: list[int]) -> Iterator[Balancer]:
    """A running balancer in front of the loopback ports `backends`."""
    lb = Balancer(backends)
    lb.start()
    try:
        yield lb
    finally:
        lb.stop()
