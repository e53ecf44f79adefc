"""The core/v1 Events the simulator records about objects: repeats counted, each expiring after the event TTL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.kinds import EVENTS
from hyperpod_twin.sim.kobj import Obj

if TYPE_CHECKING:
    from hyperpod_twin.sim.core import ClusterSim

EVENT_TTL_SECONDS = 3600.0


def record_event(
    sim: ClusterSim,
    known_events: dict[tuple[str, str, str, str], str],
    involved: Obj,
    reason: str,
    message: str,
    etype: str = "Normal",
    source: str = "",
) -> None:
    """Record a core/v1 Event about `involved` in `sim`; a repeat (same object, reason and message, as
    `known_events` remembers) bumps count and lastTimestamp; each Event expires after the API server's TTL."""
    rtype = sim.rtype(EVENTS)
    if rtype is None:
        return
    md = involved.get("metadata", {})
    ns = md.get("namespace") or "default"
    now = sim.now()
    ident = (ns, str(md.get("uid", "")), reason, message)
    known = known_events.get(ident)
    existing = sim.get(EVENTS, ns, known) if known else None
    if existing is not None:
        existing["count"] = int(existing.get("count", 1)) + 1
        existing["lastTimestamp"] = now
        existing["metadata"].pop("resourceVersion", None)
        sim.update(EVENTS, existing)
        return
    name = f"{md.get('name', 'object')}.{kobj.random_suffix(16)}"
    known_events[ident] = name

    def expire() -> None:  # the API server's event TTL (one hour by default)
        known_events.pop(ident, None)
        sim.delete(EVENTS, ns, name)

    sim.after(EVENT_TTL_SECONDS, expire)
    sim.create(
        EVENTS,
        {
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", ""),
                "kind": involved.get("kind", ""),
                "name": md.get("name", ""),
                "namespace": md.get("namespace", ""),
                "uid": md.get("uid", ""),
                "resourceVersion": md.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": etype,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": source or "twin-simulator"},
            "reportingComponent": source or "twin-simulator",
        },
    )
