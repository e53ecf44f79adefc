"""Watch-fed state: one list+watch per resource kind and cluster, kept as compact projections in memory.

An `Informer` lists a collection (paged), then watches it from the list's resourceVersion with
bookmarks; a dropped connection resumes from the last resourceVersion seen, a 410 Expired relists
and reports the difference as changes, failures back off exponentially. A collection the server does not
serve (404: a custom resource whose CRD is not installed, e.g. an operator add-on that is off) is not an
error: the informer reports the state "absent", holds no items and checks again with backoff (at most
`absent_retry_max` apart), so the watch starts by itself once the CRD appears. Objects are kept as the
projection the caller supplies (only the fields the views need), never as typed client objects.
`Informers` runs them by key, starts them on first read and stops them when nobody read them for a while.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import urllib3

from instantstart.kube import k8s
from instantstart.kube.watch_types import (
    Absent,
    ChangeListener,
    Expired,
    InformerOptions,
    Informers,
    Obj,
    Projection,
    WatchHealth,
)

log = logging.getLogger(__name__)

__all__ = [
    "Absent", "ChangeListener", "Expired", "Informer", "InformerOptions", "Informers", "Obj", "Projection",
    "WatchHealth",
]

def _key(obj: Obj) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace') or ''}/{md.get('name') or ''}"


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Informer:
    """list+watch of one collection path (e.g. /api/v1/nodes), keeping `items` = {key: projection}.

    `version` grows with every applied change, so readers can memoise what they derive from `items`.
    Listeners run in the informer's thread, after the change is applied."""

    def __init__(
        self,
        kind: str,
        path: str,
        connect: Callable[[], k8s.ApiClient],
        project: Projection,
        listeners: tuple[ChangeListener, ...] = (),
        options: InformerOptions | None = None,
    ) -> None:
        self.kind = kind
        self.path = path
        self.connect = connect
        self.project = project
        self.listeners = list(listeners)
        self.options = options or InformerOptions()
        self.items: dict[str, Obj] = {}
        self.version = 0
        self.resource_version = ""
        self.health = WatchHealth(kind)
        self.synced = threading.Event()
        self.settled = threading.Event()  # the first answer came: synced, or the collection is absent
        self.clock: Callable[[], float] = time.monotonic  # measures idleness (Informers sets its own)
        self.last_used = self.clock()
        self.stopped_idle = False  # stopped by itself for being unread (Informers.reap records it as parked)
        self.idle_seconds: float | None = None  # stop by itself after this long unread (set by Informers)
        self.derived: Any = None  # state a listener derives from the items (e.g. totals), owned by the caller
        self.memo: dict[str, tuple[Any, Any]] = {}  # readers' results memoised by the versions they read
        self._rvs: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._response: Any = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> Informer:
        """Start the list+watch thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (the thread ends at its next read or at once when blocked on the stream)."""
        self._stop.set()
        self._wake.set()
        self.health.state, self.health.connected = "stopped", False
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # the connection may already be gone
                response.shutdown()

    def wake(self) -> None:
        """Cut a backoff pause short (e.g. a reader saw that a CRD reported absent is there now)."""
        self._wake.set()

    def current(self, absent_window: float | None = None) -> bool:
        """Whether the items are the server's current state: synced and connected, or the collection was
        found absent (no items) within `absent_window` seconds (default twice `absent_retry_max`)."""
        health = self.health
        if health.state == "absent":
            window = 2 * self.options.absent_retry_max if absent_window is None else absent_window
            return health.last_ok is not None and time.time() - health.last_ok <= window
        return self.synced.is_set() and health.connected and health.state == "synced"

    @property
    def stopped(self) -> bool:
        """Whether stop() was called."""
        return self._stop.is_set()

    def snapshot(self) -> tuple[int, dict[str, Obj]]:
        """(version, a shallow copy of the items) taken atomically."""
        with self._lock:
            return self.version, dict(self.items)

    def pick(self, keys: list[str]) -> list[Obj]:
        """The items under `keys` ("namespace/name"), those held, in that order (O(len(keys)), no copy of the rest)."""
        with self._lock:
            return [self.items[k] for k in keys if k in self.items]

    # -- the loop ----------------------------------------------------------------------------------
    def _run(self) -> None:
        delay = self.options.backoff_min
        need_list = True
        while not self._stop.is_set():
            if self._idle():
                break
            try:
                api = self.connect()
                if need_list:
                    self._list(api)
                    need_list = False
                self._watch(api)
                delay = self.options.backoff_min
            except Expired:
                need_list = True
                self.health.relists += 1
            except Absent:
                need_list = True
                self._absent()
                self._pause(delay)
                delay = min(delay * 2, self.options.absent_retry_max)
            except Exception as exc:
                if self._stop.is_set():
                    break
                self.health.connected = False
                self.health.state = "reconnecting"
                self.health.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
                self.health.reconnects += 1
                log.info("watch %s lost (%s); retrying in %.1fs", self.kind, self.health.last_error, delay)
                self._pause(delay)
                delay = min(delay * 2, self.options.backoff_max)
        self.health.state, self.health.connected = "stopped", False

    def _pause(self, delay: float) -> None:
        """Wait `delay` seconds with jitter, or until stop() or wake()."""
        self._wake.wait(delay * (0.5 + random.random()))  # noqa: S311 - jitter, not crypto
        self._wake.clear()

    def _absent(self) -> None:
        """The collection is not served: no items (those held are reported deleted), state "absent"."""
        with self._lock:
            gone: list[tuple[str, str, Obj | None, Obj | None]] = [
                ("DELETED", key, old, None) for key, old in self.items.items()
            ]
            if gone:
                self.items, self._rvs = {}, {}
                self.version += 1
            self.resource_version = ""
        health = self.health
        health.state, health.connected, health.last_error = "absent", False, None
        health.last_ok = time.time()
        self.settled.set()
        self._emit(gone)

    def _request(self, api: k8s.ApiClient, query: dict[str, Any], read_timeout: float) -> Any:
        config = api.configuration
        headers = {"Accept": "application/json", "User-Agent": "instantstart-informer"}
        auth = config.get_api_key_with_prefix("authorization")
        if auth:
            headers["Authorization"] = auth
        url = f"{config.host}{self.path}?{urlencode(query)}"
        pool = api.rest_client.pool_manager
        timeout = urllib3.Timeout(connect=10.0, read=read_timeout)
        return pool.request("GET", url, headers=headers, preload_content=False, timeout=timeout, retries=False)

    def _list(self, api: k8s.ApiClient) -> None:
        fresh: dict[str, Obj] = {}
        rvs: dict[str, str] = {}
        token = ""
        while True:
            query: dict[str, Any] = {"limit": self.options.page_size}
            if token:
                query["continue"] = token
            response = self._request(api, query, 60.0)
            try:
                data = response.data
            finally:
                response.release_conn()
            if response.status == 410:
                token, fresh, rvs = "", {}, {}  # the continuation expired: list again from the start
                continue
            if response.status == 404:
                raise Absent(self.path)
            if response.status != 200:
                raise RuntimeError(f"list {self.path}: HTTP {response.status}: {data[:200]!r}")
            body = json.loads(data)
            for item in body.get("items") or []:
                key = _key(item)
                fresh[key], rvs[key] = self.project(item), _rv(item)
            meta = body.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                list_rv = str(meta.get("resourceVersion") or "")
                break
        changes: list[tuple[str, str, Obj | None, Obj | None]] = []
        with self._lock:
            for key, item in fresh.items():
                if key not in self.items:
                    changes.append(("ADDED", key, None, item))
                elif self._rvs.get(key) != rvs[key]:
                    changes.append(("MODIFIED", key, self.items[key], item))
            changes.extend(("DELETED", key, old, None) for key, old in self.items.items() if key not in fresh)
            self.items, self._rvs = fresh, rvs
            self.resource_version = list_rv
            self.version += 1
        self._mark_ok()
        self.health.state = "synced"
        self.synced.set()
        self.settled.set()
        self._emit(changes)

    def _watch(self, api: k8s.ApiClient) -> None:
        query = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version,
            "timeoutSeconds": self.options.watch_timeout,
        }
        response = self._request(api, query, self.options.read_timeout)
        self._response = response
        try:
            if response.status == 410:
                raise Expired(self.path)
            if response.status == 404:
                raise Absent(self.path)
            if response.status != 200:
                raise RuntimeError(f"watch {self.path}: HTTP {response.status}: {response.data[:200]!r}")
            self._mark_ok()
            for line in _lines(response):
                if self._stop.is_set() or self._idle():
                    return
                self._apply(json.loads(line))
        finally:
            self._response = None
            response.release_conn()

    def _apply(self, event: Obj) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if int(obj.get("code") or 0) == 410:
                raise Expired(str(obj.get("message") or "expired"))
            raise RuntimeError(f"watch {self.path}: {obj.get('message') or obj}")
        rv = _rv(obj)
        self._mark_ok()
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        key = _key(obj)
        change: tuple[str, str, Obj | None, Obj | None] | None = None
        with self._lock:
            old = self.items.get(key)
            if kind == "DELETED":
                if old is not None:
                    del self.items[key]
                    self._rvs.pop(key, None)
                    change = ("DELETED", key, old, None)
            elif kind in ("ADDED", "MODIFIED") and self._rvs.get(key) != rv:
                new = self.project(obj)
                self.items[key], self._rvs[key] = new, rv
                change = ("ADDED" if old is None else "MODIFIED", key, old, new)
            if rv:
                self.resource_version = rv
            if change is not None:
                self.version += 1
        if change is not None:
            self.health.events += 1
            self._emit([change])

    def _idle(self) -> bool:
        if self.idle_seconds is not None and self.clock() - self.last_used > self.idle_seconds:
            self.stopped_idle = True
            self.stop()
            return True
        return False

    def _mark_ok(self) -> None:
        self.health.connected = True
        self.health.last_ok = time.time()
        if self.synced.is_set():
            self.health.state = "synced"

    def _emit(self, changes: list[tuple[str, str, Obj | None, Obj | None]]) -> None:
        for change in changes:
            for listener in self.listeners:
                try:
                    listener(*change)
                except Exception:
                    log.exception("informer listener for %s failed", self.kind)


def _lines(response: Any) -> Iterator[bytes]:
    """The newline-delimited JSON lines of a streamed watch response, as they arrive."""
    buffer = b""
    chunks = response.read_chunked() if response.chunked else response.stream(4096)
    for chunk in chunks:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer
