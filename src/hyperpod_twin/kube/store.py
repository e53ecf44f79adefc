"""In-memory object store of one twin Kubernetes cluster: typed resources, resourceVersions, watchers."""

from __future__ import annotations

import builtins
import copy
import itertools
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .store_errors import AlreadyExistsError, ConflictError, NotFoundError, StoreError

Obj = dict[str, Any]


@dataclass(frozen=True)
class ResourceType:
    """One served resource: what discovery lists and what the store keys objects by."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # e.g. ("status", "scale", "log", "proxy")
    list_kind: str = ""

    @property
    def api_version(self) -> str:
        """`group/version`, or just the version for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """(group, plural): how the store and URLs identify the type."""
        return (self.group, self.plural)


@dataclass
class WatchEvent:
    """A change to one object: type is ADDED, MODIFIED or DELETED; object is a deep copy."""

    type: str
    rtype: ResourceType
    object: Obj
    resource_version: int


def now_rfc3339() -> str:
    """Kubernetes timestamp format (second precision, Z suffix)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


Listener = Callable[[WatchEvent], None]


@dataclass
class ObjectStore:
    """Objects of one cluster, keyed by (group, plural) then (namespace, name).

    Every write bumps one cluster-wide resourceVersion, stamps metadata (uid, creationTimestamp,
    generation on spec changes), and notifies listeners synchronously *after* releasing the lock
    with a deep copy, so controllers (the simulator) and watch streams see every change in order.
    """

    types: dict[tuple[str, str], ResourceType] = field(default_factory=dict)
    _objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = field(default_factory=dict)
    _rv: Iterable[int] = field(default_factory=lambda: itertools.count(1))
    _last_rv: int = 0
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _listeners: list[Listener] = field(default_factory=list)
    _history: list[WatchEvent] = field(default_factory=list)
    history_limit: int = 5000
    # Resource versions below this are expired (compact()); bumping watch_epoch cuts every open watch.
    compacted_below: int = 0
    watch_epoch: int = 0
    watches_blocked: bool = False  # new watches answer 503 (an outage of the watch path)
    # Resource plurals whose writes land but whose responses wait until released (a reply lost in flight).
    held_writes: set[str] = field(default_factory=set)
    writes_released: threading.Event = field(default_factory=lambda: _set_event())
    api_blocked: bool = False  # every resource request answers 503 (an outage of the whole API server)
    # Events recorded but not yet delivered, in resourceVersion order; one delivery at a time, so
    # listeners see changes in the order they were made even when several threads write at once.
    _undelivered: deque[WatchEvent] = field(default_factory=deque)
    _delivery: threading.RLock = field(default_factory=threading.RLock)
    # What "now" is for times the API server computes ahead (a pod's deletionTimestamp): the twin
    # clock's wall time when the twin runs the server, so grace periods pass on the twin clock.
    clock: Callable[[], float] = field(default_factory=lambda: time.time)

    # -- types -------------------------------------------------------------------------------
    def register(self, rtype: ResourceType) -> None:
        """Serve a resource type (built-ins at start, CRDs when created)."""
        with self._lock:
            self.types[rtype.key] = rtype
            self._objects.setdefault(rtype.key, {})

    def unregister(self, group: str, plural: str) -> None:
        """Stop serving a type and drop its objects (CRD deleted)."""
        with self._lock:
            self.types.pop((group, plural), None)
            self._objects.pop((group, plural), None)

    def find_type(self, group: str, plural_or_kind: str) -> ResourceType | None:
        """Look a type up by plural (as URLs name it) or kind."""
        with self._lock:
            rtype = self.types.get((group, plural_or_kind))
            if rtype is not None:
                return rtype
            for candidate in self.types.values():
                if candidate.group == group and plural_or_kind in (candidate.kind, candidate.singular):
                    return candidate
            return None

    def type_for(self, api_version: str, kind: str) -> ResourceType | None:
        """The type of an object by its apiVersion and kind."""
        group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
        with self._lock:
            for candidate in self.types.values():
                if candidate.group == group and candidate.kind == kind:
                    return candidate
        return None

    # -- reads -------------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out."""
        return self._last_rv

    def get(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        """A deep copy of one object; NotFoundError if absent."""
        with self._lock:
            obj = self._objects.get(rtype.key, {}).get((namespace if rtype.namespaced else "", name))
            if obj is None:
                raise NotFoundError(f'{rtype.plural}{"." + rtype.group if rtype.group else ""} "{name}" not found')
            return copy.deepcopy(obj)

    def peek(self, rtype: ResourceType, namespace: str, name: str) -> Obj | None:
        """One stored object itself, not copied, or None: for readers that never change it (see `view`)."""
        with self._lock:
            return self._objects.get(rtype.key, {}).get((namespace if rtype.namespaced else "", name))

    def list(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        predicate: Callable[[Obj], bool] | None = None,
    ) -> tuple[list[Obj], int]:
        """Deep copies of matching objects sorted by (namespace, name), and the store's resourceVersion."""
        with self._lock:
            items = [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(self._objects.get(rtype.key, {}).items())
                if (namespace is None or not rtype.namespaced or ns == namespace)
                and (predicate is None or predicate(obj))
            ]
            return items, self._last_rv

    def view(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        predicate: Callable[[Obj], bool] | None = None,
    ) -> builtins.list[Obj]:
        """The matching stored objects themselves, sorted by (namespace, name): no copies, for readers that
        never change them (a write replaces a stored object, it never edits one, so what a reader holds stays
        the state it read). O(matches) instead of a deep copy of every object, which the simulator's
        controllers cannot afford per event on thousands of nodes and pods."""
        with self._lock:
            return [
                obj
                for (ns, _), obj in sorted(self._objects.get(rtype.key, {}).items())
                if (namespace is None or not rtype.namespaced or ns == namespace)
                and (predicate is None or predicate(obj))
            ]

    # -- writes ------------------------------------------------------------------------------
    def create(self, rtype: ResourceType, obj: Obj) -> Obj:
        """Insert a new object (metadata.name required; generateName honoured)."""
        events: list[WatchEvent] = []
        with self._lock:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            ns = (meta.get("namespace") or "default") if rtype.namespaced else ""
            bucket = self._objects.setdefault(rtype.key, {})
            if not meta.get("name") and meta.get("generateName"):
                # A generated name that is taken is drawn again, as the API server retries generateName
                # conflicts (KEP-4420): 5 hex characters collide about twice among 2,000 pods of one owner.
                for _ in range(8):
                    meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
                    if (ns, meta["name"]) not in bucket:
                        break
            name = meta.get("name")
            if not name:
                raise StoreError("metadata.name: Required value")
            if rtype.namespaced:
                meta["namespace"] = ns
            else:
                meta.pop("namespace", None)
            if (ns, name) in bucket:
                raise AlreadyExistsError(
                    f'{rtype.plural}{"." + rtype.group if rtype.group else ""} "{name}" already exists'
                )
            obj["apiVersion"] = rtype.api_version
            obj["kind"] = rtype.kind
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            meta["resourceVersion"] = str(self._next_rv())
            bucket[(ns, name)] = obj
            events.append(self._record("ADDED", rtype, obj))
        self._notify(events)
        return copy.deepcopy(obj)

    def update(self, rtype: ResourceType, obj: Obj, *, subresource: str | None = None) -> Obj:
        """Replace an object. A resourceVersion in `obj` must match (optimistic concurrency).

        With subresource "status" only `.status` is taken from `obj`; otherwise `.status` is kept
        from the stored object when the type has a status subresource. generation grows when the
        spec (everything but metadata and status) changes.
        """
        events: list[WatchEvent] = []
        with self._lock:
            meta = obj.get("metadata", {})
            ns = (meta.get("namespace") or "default") if rtype.namespaced else ""
            name = meta.get("name", "")
            bucket = self._objects.setdefault(rtype.key, {})
            current = bucket.get((ns, name))
            if current is None:
                raise NotFoundError(f'{rtype.plural} "{name}" not found')
            wanted_rv = meta.get("resourceVersion")
            if wanted_rv and str(wanted_rv) != current["metadata"]["resourceVersion"]:
                raise ConflictError(
                    f'Operation cannot be fulfilled on {rtype.plural} "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again"
                )
            new = copy.deepcopy(current) if subresource == "status" else copy.deepcopy(obj)
            if subresource == "status":
                new["status"] = copy.deepcopy(obj.get("status", {}))
            elif "status" in rtype.subresources:
                if "status" in current:
                    new["status"] = copy.deepcopy(current["status"])
                else:
                    new.pop("status", None)
            new_meta = new.setdefault("metadata", {})
            for fixed in ("uid", "creationTimestamp", "namespace", "name"):
                if fixed in current["metadata"]:
                    new_meta[fixed] = current["metadata"][fixed]
            if rtype.namespaced:
                new_meta["namespace"] = ns
            new["apiVersion"] = rtype.api_version
            new["kind"] = rtype.kind
            generation = int(current["metadata"].get("generation", 1))
            if _spec_of(new) != _spec_of(current):
                generation += 1
            new_meta["generation"] = generation
            # A write that changes nothing (metadata included) is a no-op: no new resourceVersion, no event.
            new_meta["resourceVersion"] = current["metadata"]["resourceVersion"]
            if new == current:
                return copy.deepcopy(current)
            new_meta["resourceVersion"] = str(self._next_rv())
            bucket[(ns, name)] = new
            events.append(self._record("MODIFIED", rtype, new))
        self._notify(events)
        return copy.deepcopy(new)

    def delete(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        """Remove an object now (finalizers and cascading are the API server's concern)."""
        events: list[WatchEvent] = []
        with self._lock:
            key = (namespace if rtype.namespaced else "", name)
            bucket = self._objects.get(rtype.key, {})
            obj = bucket.pop(key, None)
            if obj is None:
                raise NotFoundError(f'{rtype.plural}{"." + rtype.group if rtype.group else ""} "{name}" not found')
            obj["metadata"]["resourceVersion"] = str(self._next_rv())
            events.append(self._record("DELETED", rtype, obj))
        self._notify(events)
        return copy.deepcopy(obj)

    # -- watching ----------------------------------------------------------------------------
    def add_listener(self, listener: Listener) -> None:
        """Call `listener` with every change from now on (synchronously, outside the store lock)."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling `listener`."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def listeners(self) -> tuple[Listener, ...]:
        """The registered listeners now (one per open watch stream, plus the controllers')."""
        with self._lock:
            return tuple(self._listeners)

    @property
    def listener_count(self) -> int:
        """How many listeners are registered (watch streams unsubscribe when they end)."""
        with self._lock:
            return len(self._listeners)

    def events_since(
        self, resource_version: int, rtype: ResourceType | None = None
    ) -> builtins.list[WatchEvent] | None:
        """Recorded events newer than `resource_version`, or None when history no longer reaches back
        that far (the API server then answers 410 Gone, as Kubernetes does)."""
        with self._lock:
            if self._history and resource_version < self._history[0].resource_version - 1:
                return None
            if resource_version < self.compacted_below:
                return None
            return [
                e
                for e in self._history
                if e.resource_version > resource_version and (rtype is None or e.rtype.key == rtype.key)
            ]

    def compact(self) -> int:
        """Forget the change history, as etcd compaction does: a watch from an older version gets 410."""
        with self._lock:
            self._history.clear()
            self.compacted_below = self._last_rv
            return self._last_rv

    def cut_watches(self) -> None:
        """Drop every open watch connection (a network failure, as the watching clients see it)."""
        with self._lock:
            self.watch_epoch += 1

    # -- internals ---------------------------------------------------------------------------
    def _next_rv(self) -> int:
        self._last_rv = next(iter(self._rv))
        return self._last_rv

    def _record(self, kind: str, rtype: ResourceType, obj: Obj) -> WatchEvent:
        event = WatchEvent(kind, rtype, copy.deepcopy(obj), self._last_rv)
        self._history.append(event)
        self._undelivered.append(event)
        if len(self._history) > self.history_limit:
            del self._history[: len(self._history) - self.history_limit]
        return event

    def _notify(self, events: builtins.list[WatchEvent]) -> None:
        """Deliver every undelivered event (`events` among them) in order, outside the store lock.

        A writer whose event another thread is delivering waits for that delivery, so a write still
        returns only after its listeners ran. A listener that writes delivers its own event at once
        (the delivery lock is reentrant), as before."""
        del events  # queued by _record, delivered from the queue to keep the global order
        with self._delivery:
            while True:
                with self._lock:
                    if not self._undelivered:
                        return
                    event = self._undelivered.popleft()
                    listeners = list(self._listeners)
                for listener in listeners:
                    listener(event)


def _spec_of(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _set_event() -> threading.Event:
    event = threading.Event()
    event.set()
    return event
