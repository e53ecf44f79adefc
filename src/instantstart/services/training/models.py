"""The shapes every training path shares: one job summary and one pod line, whatever the job's kind."""

from __future__ import annotations

from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.kube import wire
from instantstart.kube.wire import Obj


class JobSummary(WireModel):
    """One job, the same shape for every kind."""

    name: str
    namespace: str
    kind: str
    state: str = Field(description="The last true condition: Created, Running, Restarting, Completed, Failed.")
    nodes: int
    instance_type: str | None
    restart_count: int
    recipe: str | None
    created_at: str | None


class JobPod(WireModel):
    """A pod of the job."""

    name: str
    node: str | None
    phase: str
    restarts: int


def job_pod(pod: Obj) -> JobPod:
    """A pod of a job as the API server sent it, summed up."""
    return JobPod(name=wire.name(pod), node=wire.node_name(pod), phase=wire.phase(pod) or "Pending",
                  restarts=wire.restarts(pod))
