"""The simulator of one twin cluster: a serialized work queue that runs controllers on store changes."""

from __future__ import annotations

import builtins
import copy
import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hyperpod_twin.clock import TwinClock
from hyperpod_twin.kube import graceful
from hyperpod_twin.kube.priority import admit_priority
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.status import ApiError
from hyperpod_twin.kube.store import ObjectStore, ResourceType, WatchEvent
from hyperpod_twin.kube.store_errors import NotFoundError, StoreError
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.kinds import NAMESPACES, PODS, TypeKey
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.recorded_events import record_event

if TYPE_CHECKING:
    from hyperpod_twin.events import EventBus

log = logging.getLogger(__name__)


@dataclass
class SimConfig:
    """Timings of the simulated kubelets and controllers, in twin seconds."""

    pod_start_seconds: float = 2.0  # scheduling → Running (image pull, container start)
    pod_ready_seconds: float = 1.0  # Running → Ready (readiness probe)
    job_run_seconds: float = 5.0  # how long a run-to-completion container runs by default
    node_reboot_seconds: float = 30.0  # NotReady time of a rebooting node
    karpenter_interval_seconds: float = 10.0  # how often Karpenter reconsiders pending pods / idle nodes
    keda_interval_seconds: float = 15.0  # how often KEDA re-reads its triggers
    prefill_seconds: float = 0.2  # a simulated model server's time to first token
    decode_seconds_per_token: float = 0.02  # and per further token (what routers count as running requests)


def _without(value: Any, keys: tuple[str, ...]) -> Any:
    """`value` with every dict key in `keys` dropped, recursively."""
    if not keys:
        return value
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


@dataclass
class _Work:
    controller: Controller | None
    key: Hashable
    fn: Callable[[], None] | None = None


@dataclass
class ClusterSim:
    """Controllers of one twin cluster working on its runtime's store.

    Every change in the store is turned into work items; one thread at a time drains the queue
    (whoever wrote first, or the clock thread for timed steps), so controllers never race each
    other and writes they make while draining are queued, not recursed into. A store listener never
    blocks: if another thread is draining, it leaves its work for that thread.
    """

    runtime: ClusterRuntime
    clock: TwinClock
    bus: EventBus | None = None
    config: SimConfig = field(default_factory=SimConfig)
    extra: dict[str, Any] = field(default_factory=dict)  # plugin context (boto3 factory, HyperPod name)
    controllers: list[Controller] = field(default_factory=list)
    _queue: deque[_Work] = field(default_factory=deque)
    _queued: set[tuple[int, Hashable]] = field(default_factory=set)
    _qlock: threading.Lock = field(default_factory=threading.Lock)
    _drain_lock: threading.RLock = field(default_factory=threading.RLock)
    _draining: bool = False
    _tick_pending: bool = False
    _epoch: int = 0
    _events: dict[tuple[str, str, str, str], str] = field(default_factory=dict)  # (ns, uid, reason, msg) → name
    _running: bool = False

    @property
    def store(self) -> ObjectStore:
        """The cluster's ObjectStore."""
        return self.runtime.store

    # -- lifecycle ---------------------------------------------------------------------------------
    def add(self, controller: Controller) -> None:
        """Add a controller (before `start`)."""
        self.controllers.append(controller)

    def start(self) -> None:
        """Listen to the store and reconcile what already exists."""
        if self._running:
            return
        self._running = True
        self.store.add_listener(self._on_event)
        for controller in self.controllers:
            for key in controller.resync_keys():
                self._enqueue(_Work(controller, key))
        self.kick()

    def stop(self) -> None:
        """Stop listening; timers already scheduled become no-ops."""
        self._running = False
        self._epoch += 1
        self.store.remove_listener(self._on_event)
        for controller in self.controllers:
            controller.stop()
        with self._qlock:
            self._queue.clear()
            self._queued.clear()

    def controller(self, cls: type[Any]) -> Any:
        """The controller instance of a class (for cross-controller calls)."""
        for controller in self.controllers:
            if isinstance(controller, cls):
                return controller
        raise LookupError(cls.__name__)

    # -- work queue --------------------------------------------------------------------------------
    def _on_event(self, event: WatchEvent) -> None:
        if not self._running:
            return
        for controller in self.controllers:
            if event.rtype.key in controller.watches:
                try:
                    keys = list(controller.keys_for(event))
                except Exception:
                    log.exception("simulator: %s.keys_for failed", type(controller).__name__)
                    continue
                for key in keys:
                    self._enqueue(_Work(controller, key))
        self.kick()

    def enqueue(self, controller: Controller, key: Hashable) -> None:
        """Ask `controller` to reconcile `key` soon (drained by the current or next drainer)."""
        self._enqueue(_Work(controller, key))

    def _enqueue(self, work: _Work) -> None:
        ident = (id(work.controller) if work.controller else id(work.fn), work.key)
        with self._qlock:
            if work.fn is None and ident in self._queued:
                return
            if work.fn is None:
                self._queued.add(ident)
            self._queue.append(work)

    def after(self, delay: float, fn: Callable[[], None]) -> None:
        """Run `fn` (serialized with the controllers) once `delay` twin seconds have passed."""
        epoch = self._epoch

        def fire() -> None:
            if epoch != self._epoch or not self._running:
                return
            self._enqueue(_Work(None, None, fn))
            # One drain per clock tick, after every callback due at this time has queued its work:
            # the reconciles those callbacks cause then coalesce (a ReplicaSet whose 256 pods all
            # start in the same second is reconciled once, not 256 times).
            with self._qlock:
                if self._tick_pending:
                    return
                self._tick_pending = True
            self.clock.schedule(0, self._tick)

        self.clock.schedule(delay, fire)

    def _tick(self) -> None:
        with self._qlock:
            self._tick_pending = False
        if self._running:
            self.kick(block=True)

    def run(self, fn: Callable[[], None]) -> None:
        """Run `fn` serialized with the controllers, waiting for the queue to drain."""
        self._enqueue(_Work(None, None, fn))
        self.kick(block=True)

    def requeue(self, controller: Controller, key: Hashable, delay: float) -> None:
        """Reconcile `key` again after `delay` twin seconds (periodic controllers)."""
        self.after(delay, lambda: self.enqueue(controller, key))

    def kick(self, *, block: bool = False) -> None:
        """Drain the queue unless another thread is draining (then it will see our work)."""
        while True:
            if not self._drain_lock.acquire(blocking=block):
                return
            try:
                if self._draining:  # re-entered from a write made while draining
                    return
                self._draining = True
                try:
                    self._drain()
                finally:
                    self._draining = False
            finally:
                self._drain_lock.release()
            with self._qlock:
                if not self._queue:
                    return

    def _drain(self) -> None:
        budget = 100_000  # a runaway controller loop must not hang the twin
        while budget > 0:
            with self._qlock:
                if not self._queue:
                    return
                work = self._queue.popleft()
                if work.fn is None:
                    self._queued.discard((id(work.controller), work.key))
            budget -= 1
            try:
                if work.fn is not None:
                    work.fn()
                elif work.controller is not None:
                    work.controller.reconcile(work.key)
            except StoreError as exc:
                # Conflicts and vanished objects are normal races with API clients: retry once later.
                log.debug("simulator: %s while working on %s: %s", type(exc).__name__, work.key, exc)
                if work.controller is not None and not isinstance(exc, NotFoundError):
                    self.requeue(work.controller, work.key, 1.0)
            except Exception:
                log.exception("simulator: work item %r failed", work.key)
        log.error("simulator: work queue did not settle; dropping the rest")
        with self._qlock:
            self._queue.clear()
            self._queued.clear()

    # -- store helpers -----------------------------------------------------------------------------
    def rtype(self, key: TypeKey) -> ResourceType | None:
        """The registered type for (group, plural), or None when not served (CRD not installed)."""
        rtype: ResourceType | None = self.store.find_type(*key)
        return rtype

    def get(self, key: TypeKey, namespace: str, name: str) -> Obj | None:
        """One object or None."""
        rtype = self.rtype(key)
        if rtype is None:
            return None
        try:
            obj: Obj = self.store.get(rtype, namespace, name)
        except NotFoundError:
            return None
        return obj

    def list(self, key: TypeKey, namespace: str | None = None) -> list[Obj]:
        """Objects of a type (all namespaces when `namespace` is None); [] when the type is absent."""
        rtype = self.rtype(key)
        if rtype is None:
            return []
        items, _ = self.store.list(rtype, namespace)
        result: list[Obj] = items
        return result

    def view(self, key: TypeKey, namespace: str | None = None) -> builtins.list[Obj]:
        """Objects of a type as stored, not copied: read them, never change them (see ObjectStore.view)."""
        rtype = self.rtype(key)
        if rtype is None:
            return []
        found: builtins.list[Obj] = self.store.view(rtype, namespace)
        return found

    def peek(self, key: TypeKey, namespace: str, name: str) -> Obj | None:
        """One object as stored, not copied, or None: read it, never change it (see ObjectStore.view)."""
        rtype = self.rtype(key)
        if rtype is None:
            return None
        found: Obj | None = self.store.peek(rtype, namespace, name)
        return found

    def create(self, key: TypeKey, obj: Obj) -> Obj | None:
        """Create an object; None when the type is absent or the name is taken."""
        rtype = self.rtype(key)
        if rtype is None:
            return None
        if key == PODS:  # controllers create pods through the API server: Priority admission applies
            try:
                admit_priority(self.store, obj)
            except ApiError as exc:
                log.info("simulator: pod refused: %s", exc)
                return None
        try:
            created: Obj = self.store.create(rtype, obj)
        except StoreError as exc:
            log.debug("simulator: create %s failed: %s", key, exc)
            return None
        return created

    def update(self, key: TypeKey, obj: Obj) -> Obj:
        """Replace an object (optimistic concurrency on its resourceVersion)."""
        rtype = self.rtype(key)
        if rtype is None:
            raise NotFoundError(f"{key} is not served")
        updated: Obj = self.store.update(rtype, obj)
        return updated

    def update_status(self, key: TypeKey, obj: Obj) -> Obj:
        """Write obj.status through the status subresource when the type has one."""
        rtype = self.rtype(key)
        if rtype is None:
            raise NotFoundError(f"{key} is not served")
        sub = "status" if "status" in rtype.subresources else None
        updated: Obj = self.store.update(rtype, obj, subresource=sub)
        return updated

    def save(self, key: TypeKey, obj: Obj) -> Obj:
        """Write spec/metadata and status of `obj` (two writes when the type has a status subresource)."""
        obj = copy.deepcopy(obj)
        obj["metadata"].pop("resourceVersion", None)
        stored = self.update(key, obj)
        if "status" in obj and stored.get("status") != obj["status"]:
            stored["status"] = obj["status"]
            stored["metadata"].pop("resourceVersion", None)
            stored = self.update_status(key, stored)
        return stored

    def patch_status(self, key: TypeKey, obj: Obj, status: Obj, *, volatile: tuple[str, ...] = ()) -> Obj:
        """Set obj.status to `status` if it differs; returns the stored object.

        Keys named in `volatile` (timestamps such as lastUpdated, at any depth) do not count as a
        difference: a status whose only change is the time of writing is not written, so a
        controller woken by its own status update settles instead of rewriting it forever.
        """
        if _without(obj.get("status"), volatile) == _without(status, volatile):
            return obj
        new = copy.deepcopy(obj)
        new["status"] = status
        new["metadata"].pop("resourceVersion", None)
        return self.update_status(key, new)

    def delete(self, key: TypeKey, namespace: str, name: str) -> bool:
        """Delete an object; False when it was already gone."""
        rtype = self.rtype(key)
        if rtype is None:
            return False
        try:
            self.store.delete(rtype, namespace, name)
        except NotFoundError:
            return False
        return True

    def delete_pod(self, namespace: str, name: str) -> bool:
        """Delete a pod as a controller does through the API: with the pod's own grace period (a scheduled,
        unfinished pod goes Terminating until its kubelet's final delete, `kube/graceful.py`); False when gone."""
        rtype = self.rtype(PODS)
        if rtype is None:
            return False
        try:
            graceful.delete_pod(self.store, rtype, self.store.get(rtype, namespace, name), {}, self.store.clock)
        except NotFoundError:
            return False
        return True

    def owned(self, key: TypeKey, owner: Obj) -> builtins.list[Obj]:
        """Objects of a type in the owner's namespace whose controller is `owner`."""
        rtype = self.rtype(key)
        if rtype is None:
            return []
        # Filter before the store copies, so only the owner's objects are deep-copied.
        items, _ = self.store.list(rtype, owner["metadata"].get("namespace"), lambda o: kobj.is_owned_by(o, owner))
        result: builtins.list[Obj] = items
        return result

    def view_owned(self, key: TypeKey, owner: Obj) -> builtins.list[Obj]:
        """`owned` without copies: read them, never change them."""
        rtype = self.rtype(key)
        if rtype is None:
            return []
        found: builtins.list[Obj] = self.store.view(
            rtype, owner["metadata"].get("namespace"), lambda o: kobj.is_owned_by(o, owner)
        )
        return found

    # -- time and events ---------------------------------------------------------------------------
    def now(self) -> str:
        """Twin time as a Kubernetes timestamp."""
        return kobj.rfc3339(self.clock.wall())

    def event(self, involved: Obj, reason: str, message: str, etype: str = "Normal", source: str = "") -> None:
        """Record a core/v1 Event about `involved`; a repeat bumps count and lastTimestamp."""
        record_event(self, self._events, involved, reason, message, etype, source)

    def ensure_namespace(self, name: str) -> None:
        """Create a namespace if it is missing (operators install into their own namespaces)."""
        if self.get(NAMESPACES, "", name) is None:
            self.create(NAMESPACES, {"metadata": {"name": name}, "spec": {}, "status": {"phase": "Active"}})
