"""The parts of watch-fed state the informers share: its types, the watch's health, its tuning and the registry."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from instantstart.readonly import refuse_write

if TYPE_CHECKING:
    from instantstart.kube.informers import Informer

Obj = dict[str, Any]
Projection = Callable[[Obj], Obj]
ChangeListener = Callable[[str, str, Obj | None, Obj | None], None]
"""(type ADDED/MODIFIED/DELETED, key "namespace/name", old projection, new projection)."""


class Expired(Exception):
    """The server no longer has the history the watch or the list continuation asked for (HTTP 410)."""


class Absent(Exception):
    """The server does not serve the collection (HTTP 404): its CustomResourceDefinition is not installed."""


@dataclass
class WatchHealth:
    """How one watch is doing, as status tools report it."""

    kind: str
    state: str = "starting"  # starting, synced, reconnecting, absent (the CRD is not installed), stopped
    connected: bool = False
    last_ok: float | None = None  # wall time the data was last known current
    last_error: str | None = None
    reconnects: int = 0
    relists: int = 0
    events: int = 0

    def as_dict(self, now: float | None = None) -> dict[str, Any]:
        """Wire form, with the age of the data."""
        now = time.time() if now is None else now
        age = None if self.last_ok is None else round(0.0 if self.connected else max(now - self.last_ok, 0.0), 1)
        return {
            "kind": self.kind,
            "state": self.state,
            "connected": self.connected,
            "dataAgeSeconds": age,
            "lastError": self.last_error,
            "reconnects": self.reconnects,
            "relists": self.relists,
            "events": self.events,
        }


@dataclass
class InformerOptions:
    """Tuning of a watch: page size of lists, the server-side watch timeout, the client read timeout
    (a silent connection is declared lost after it), and the reconnect backoff."""

    page_size: int = 500
    watch_timeout: int = 300
    read_timeout: float = 75.0
    backoff_min: float = 0.2
    backoff_max: float = 10.0
    absent_retry_max: float = 5.0


@dataclass
class Informers:
    """The running informers by key; each started on first use, stopped after `idle_seconds` unread ("parked":
    `parked` keeps when, by `clock`, and a read resumes it), except a pinned one (a feed whose listener records
    what it sees, started and stopped by its owner, not by reads). `clock` measures idleness (a test advances it)."""

    idle_seconds: float = 300.0
    clock: Callable[[], float] = time.monotonic
    running: dict[str, Informer] = field(default_factory=dict)
    parked: dict[str, float] = field(default_factory=dict)  # key → clock time it was stopped for being unread
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: str, factory: Callable[[], Informer], *, pinned: bool = False, touch: bool = True) -> Informer:
        """The informer under `key`, started by `factory()` when absent or stopped (a parked one resumes: it lists
        again); marks it used unless `touch` is False (a background reader that must not keep it from parking).
        `pinned`: it never stops for being unread (only `stop` ends it)."""
        self.reap()
        with self._lock:
            informer = self.running.get(key)
            if informer is None or informer.stopped:
                if pinned:
                    refuse_write(f"start the feed {key}")  # a feed records what it sees: its owner starts it
                informer = factory()
                informer.clock, informer.last_used = self.clock, self.clock()  # before its thread checks idleness
                informer.idle_seconds = None if pinned else self.idle_seconds
                self.running[key] = informer.start()
                self.parked.pop(key, None)
            elif pinned:
                informer.idle_seconds = None
            if touch:
                informer.last_used = self.clock()
            return informer

    def peek(self, key: str) -> Informer | None:
        """The running informer under `key`, if any; starts nothing and does not count as a read."""
        with self._lock:
            informer = self.running.get(key)
            return None if informer is None or informer.stopped else informer

    def reap(self) -> list[str]:
        """Park the informers nobody read for `idle_seconds` (never a pinned one): stop them (their items are
        released) and record when; one that stopped itself for idleness is recorded too. Returns their keys."""
        now = self.clock()
        with self._lock:
            idle = [k for k, i in self.running.items() if i.idle_seconds is not None
                    and (now - i.last_used > i.idle_seconds or (i.stopped and i.stopped_idle))]
            stopped = [self.running.pop(k) for k in idle]
            self.parked.update(dict.fromkeys(idle, now))
        for informer in stopped:
            informer.stop()
        return idle

    def stop(self, prefix: str = "") -> None:
        """Stop every informer whose key starts with `prefix` (all by default)."""
        with self._lock:
            keys = [k for k in self.running if k.startswith(prefix)]
            stopped = [self.running.pop(k) for k in keys]
        for informer in stopped:
            informer.stop()
