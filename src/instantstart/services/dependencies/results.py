"""What a dependency reconcile acts on and reports: the target cluster, per-dependency results, failures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from instantstart.aws.errors import translate
from instantstart.errors import DependencyFailed, InstantStartError
from instantstart.kube.gateway import api_failure
from instantstart.kube.helm import HelmError

Progress = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Target:
    """The cluster a reconcile acts on."""

    tag: str
    region: str
    eks_cluster_name: str
    bucket: str | None
    operation_id: str | None


@dataclass
class DepResult:
    """What one dependency ended as: desired vs actual, status, what was done, and a hint on failure."""

    name: str
    source: str
    desired: dict[str, Any]
    actual: dict[str, Any] = field(default_factory=dict)
    status: str = "PENDING"
    action: str = "none"
    message: str = ""
    hint: str | None = None
    updated_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form persisted in the cluster row (details.dependencies) and shown by the status tool."""
        return {
            "name": self.name,
            "source": self.source,
            "desired": self.desired,
            "actual": self.actual,
            "status": self.status,
            "action": self.action,
            "message": self.message,
            "hint": self.hint,
            "updatedAt": self.updated_at or datetime.now(UTC).isoformat(),
        }


def failure_of(exc: BaseException) -> DependencyFailed:
    """Any failure of one dependency's reconcile as a DependencyFailed (message, hint, retryable)."""
    if isinstance(exc, DependencyFailed):
        return exc
    if isinstance(exc, HelmError):
        return DependencyFailed(exc.message, hint=exc.hint if exc.hint != exc.default_hint else _helm_hint(exc.stderr))
    if isinstance(exc, InstantStartError):
        return DependencyFailed(exc.message, hint=exc.hint, retryable=exc.retryable)
    failure = api_failure(exc)
    if failure is not None:
        return DependencyFailed(
            f"Kubernetes API: {failure.status} {failure.reason}", hint="Check the cluster's API server.", retryable=True
        )
    error = translate(exc if isinstance(exc, Exception) else Exception(str(exc)), "reconcile")
    return DependencyFailed(error.message, hint=error.hint, retryable=error.retryable)


def _helm_hint(stderr: str) -> str:
    text = stderr.lower()
    if "repo" in text or "index.yaml" in text or "no such host" in text or "connection refused" in text:
        return (
            "The chart repository could not be read: check INSTANTSTART_HELM_REPOSITORY_URL (or the catalog's "
            "repository) and that the control plane can reach it, then run cluster_configure_dependencies again."
        )
    if "another operation" in text:
        return "A previous helm operation is stuck: `helm rollback` or uninstall the release, then run again."
    return "Read the helm message in the details, fix the cause, then run cluster_configure_dependencies again."
