"""The controller base classes: a reconciler of watched kinds, and one that its owned dependents wake."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.kinds import TypeKey

if TYPE_CHECKING:
    from hyperpod_twin.sim.core import ClusterSim


class Controller(ABC):
    """A reconciler: `watches` names the types whose changes it hears; `keys_for` maps a change to
    the keys it must reconcile; `reconcile(key)` makes the world match. Reconciles are level-based,
    so a key reconciled twice is harmless."""

    watches: tuple[TypeKey, ...] = ()

    def __init__(self, sim: ClusterSim) -> None:
        self.sim = sim

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        """Keys to reconcile because of `event` (default: the changed object's (namespace, name))."""
        md = event.object.get("metadata", {})
        return [(md.get("namespace", ""), md.get("name", ""))]

    def resync_keys(self) -> Iterable[Hashable]:
        """Keys to reconcile when the controller starts (everything it watches that exists)."""
        return []

    def stop(self) -> None:  # noqa: B027 - optional hook, most controllers hold nothing
        """Release what the controller holds (worker threads); the default holds nothing."""

    @abstractmethod
    def reconcile(self, key: Hashable) -> None:
        """Bring the object named by `key` to its desired state."""


class OwnerController(Controller):
    """A controller of one `primary` type that its dependents wake: a change to an object of a type in
    `owns` reconciles the owner named by its controller ownerReference (when the kind matches)."""

    primary: TypeKey = ("", "")
    owns: dict[TypeKey, str] = {}  # dependent type → kind of the owner in its controller reference

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "watches" not in cls.__dict__:
            cls.watches = (cls.primary, *cls.owns)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        if event.rtype.key == self.primary:
            return super().keys_for(event)
        kind = self.owns.get(event.rtype.key)
        ref = kobj.controller_of(event.object)
        if kind and ref and ref.get("kind") == kind:
            return [(event.object["metadata"].get("namespace", "default"), ref["name"])]
        return []

    def resync_keys(self) -> Iterable[Hashable]:
        return [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in self.sim.list(self.primary)]
