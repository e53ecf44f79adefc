"""Contexts handed to operations: the application (settings, database, runner, clients) and one call."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar, cast

from instantstart.aws.clients import AwsClients
from instantstart.describe_cache import DbReadCache, DescribeCache
from instantstart.kube.client import KubeClients
from instantstart.kube.informers import ChangeListener, Informers
from instantstart.operations.runner import Runner
from instantstart.operations.stage import StageContext as EngineStageContext
from instantstart.principal import Principal
from instantstart.settings import Settings
from instantstart.store.db import Database

T = TypeVar("T")


class Slot(Generic[T]):
    """The name of one object a service keeps per application (a module constant, never state itself)."""

    def __init__(self, name: str) -> None:
        self.name = name


class Owned:
    """Objects services keep per application (the timeline writer, the cluster feeds, the alert loop): held by
    the application context, so two contexts in one process never share one and none outlives its context."""

    def __init__(self) -> None:
        self._items: dict[Slot[Any], Any] = {}
        self._lock = threading.Lock()

    def get(self, slot: Slot[T], make: Callable[[], T]) -> T:
        """The object in `slot`, made by `make()` on first use (once, whatever the thread)."""
        with self._lock:
            if slot not in self._items:
                self._items[slot] = make()
            return cast(T, self._items[slot])

    def peek(self, slot: Slot[T]) -> T | None:
        """The object in `slot`, or None."""
        with self._lock:
            return cast("T | None", self._items.get(slot))

    def put(self, slot: Slot[T], value: T) -> None:
        """Keep `value` in `slot` (replacing what was there)."""
        with self._lock:
            self._items[slot] = value

    def pop(self, slot: Slot[T]) -> T | None:
        """Take the object out of `slot` (None when empty)."""
        with self._lock:
            return cast("T | None", self._items.pop(slot, None))


ChangeHook = Callable[["AppContext", str, str], None]
"""Called (app, cluster tag, kind) from a watch's thread after a change of what the live views show."""

ListenerFactory = Callable[["AppContext", str], ChangeListener]
"""Called (app, cluster tag) when an informer starts: the extra listener it gets (e.g. the timeline's for events)."""


@dataclass
class AppContext:
    """Process-wide state shared by every face: settings, database, runner, AWS and Kubernetes clients."""

    settings: Settings
    db: Database
    runner: Runner[AppContext]
    aws: AwsClients
    kube: KubeClients
    cache: DescribeCache
    informers: Informers = field(default_factory=Informers)
    db_reads: DbReadCache = field(default_factory=DbReadCache)  # status-path database reads (base.watch.state)
    change_hooks: list[ChangeHook] = field(default_factory=list)  # the WebSocket hub's, see base.watch.state
    listener_factories: dict[str, list[ListenerFactory]] = field(default_factory=dict)  # per kind, base.watch.state
    owned: Owned = field(default_factory=Owned)


StageContext: TypeAlias = EngineStageContext[AppContext]
"""What the control plane's stage functions receive: the engine's stage context over this application."""


@dataclass
class CallContext:
    """One call of one operation, from any face. `principal` is the authenticated caller; None only for an
    in-process call no face received (the event hub's snapshot reads), which no role check applies to."""

    app: AppContext
    idempotency_key: str | None = None
    request_id: str | None = None
    face: str = "rest"
    extra: dict[str, str] = field(default_factory=dict)
    principal: Principal | None = None
