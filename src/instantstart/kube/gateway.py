"""The Kubernetes gateway's handle and errors: services name an `Api` and read an `ApiFailure`, never the client."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TypeAlias

from instantstart.kube import k8s

# The handle services pass around (an EKS cluster's ApiClient, from `calls.kube_api`); a string so that naming the
# type loads nothing (the client is imported on first use, see `kube.k8s`).
Api: TypeAlias = "k8s.ApiClient"


@dataclass(frozen=True)
class ApiFailure:
    """An answer of the API server that was an HTTP error: its status and reason."""

    status: int | None  # None: the client raised it without an answer
    reason: str | None


def api_failure(exc: BaseException) -> ApiFailure | None:
    """The API server's HTTP error carried by `exc`, or None when `exc` is something else (transport, ours)."""
    if "kubernetes.client" not in sys.modules or not isinstance(exc, k8s.ApiException):
        return None
    return ApiFailure(exc.status, exc.reason)


def api_status(exc: BaseException) -> int | None:
    """The HTTP status of the API server's error carried by `exc` (404, 409, ...), or None for any other error."""
    failure = api_failure(exc)
    return None if failure is None else failure.status
