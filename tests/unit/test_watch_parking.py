"""Watch parking by an injected clock: an informer unread for idle_seconds is stopped and recorded as parked, a
read resumes it with a fresh informer, a background reader (touch=False) never keeps one alive, a pinned one never
parks; and the running-job count the fleet shows."""

from __future__ import annotations

from typing import Any

from instantstart.kube.informers import Informer, Informers
from instantstart.manifests.training import POD_JOB_LABEL
from instantstart.services.cluster.fleet import running_jobs


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def unreachable() -> Any:
    raise ConnectionRefusedError("no API server in a unit test")


def make(kind: str) -> Informer:
    return Informer(kind, f"/api/v1/{kind}", unreachable, lambda obj: obj)


def test_an_unread_informer_parks_and_a_read_resumes_it() -> None:
    clock = Clock()
    infs = Informers(idle_seconds=10.0, clock=clock)
    try:
        nodes = infs.get("r:c1:nodes", lambda: make("nodes"))
        pods = infs.get("r:c1:pods", lambda: make("pods"))
        feed = infs.get("r:c1:events", lambda: make("events"), pinned=True)
        clock.now += 6
        assert infs.get("r:c1:pods", lambda: make("pods")) is pods  # read: kept
        assert infs.get("r:c1:nodes", lambda: make("nodes"), touch=False) is nodes  # a background look: not a read
        clock.now += 6
        assert infs.reap() == ["r:c1:nodes"]
        assert nodes.stopped and not pods.stopped and not feed.stopped
        assert infs.peek("r:c1:nodes") is None and infs.parked == {"r:c1:nodes": clock.now}
        clock.now += 100
        assert sorted(infs.reap()) == ["r:c1:pods"]  # the pinned feed never parks
        assert not feed.stopped and set(infs.parked) == {"r:c1:nodes", "r:c1:pods"}
        resumed = infs.get("r:c1:nodes", lambda: make("nodes"))
        assert resumed is not nodes and not resumed.stopped and resumed.last_used == clock.now
        assert "r:c1:nodes" not in infs.parked
    finally:
        infs.stop()


def test_an_informer_that_stopped_itself_for_idleness_is_recorded_parked() -> None:
    clock = Clock()
    infs = Informers(idle_seconds=10.0, clock=clock)
    try:
        inf = infs.get("r:c2:nodes", lambda: make("nodes"))
        clock.now += 11
        assert inf._idle()  # what its thread checks between events
        assert inf.stopped and inf.stopped_idle
        clock.now -= 11  # even before reap's own clock says so, the self-stopped one is parked
        assert infs.reap() == ["r:c2:nodes"] and "r:c2:nodes" in infs.parked
    finally:
        infs.stop()


def test_running_jobs_counts_jobs_with_a_running_pod() -> None:
    def pod(ns: str, phase: str, labels: dict[str, str]) -> dict[str, Any]:
        return {"namespace": ns, "phase": phase, "labels": labels}

    pods = {
        "a/1": pod("a", "Running", {POD_JOB_LABEL: "j1"}),
        "a/2": pod("a", "Running", {POD_JOB_LABEL: "j1"}),  # the same job
        "b/1": pod("b", "Running", {POD_JOB_LABEL: "j1"}),  # another namespace: another job
        "a/3": pod("a", "Pending", {POD_JOB_LABEL: "j2"}),  # not running yet
        "a/4": pod("a", "Running", {}),  # not a job's pod
    }
    assert running_jobs(pods) == 2
