"""Calling the Kubernetes API: the ApiClient of an EKS cluster, error translation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from instantstart.aws.errors import translate
from instantstart.errors import (
    Conflict,
    InstantStartError,
    InvalidInput,
    NotFound,
    PreconditionFailed,
    ProviderError,
    Throttled,
)
from instantstart.kube import k8s
from instantstart.kube.client import KubeClients

T = TypeVar("T")


def kube_error(exc: Exception, action: str) -> InstantStartError:
    """The domain error for a failed Kubernetes call (API status → code; transport failures retryable)."""
    if isinstance(exc, InstantStartError):
        return exc
    if isinstance(exc, k8s.ApiException):
        status = int(exc.status or 0)
        text = f"{action}: HTTP {status}: {exc.reason}"
        if status == 404:
            return NotFound(text)
        if status == 409:
            return Conflict(text)
        if status == 422:
            return InvalidInput(text, hint="Kubernetes rejected the object as built; check the values named.")
        if status == 429:
            return Throttled(text)
        if status in (401, 403):
            return PreconditionFailed(
                text, hint="The control plane's identity needs an EKS access entry with cluster-admin (the EKS stage)."
            )
        return ProviderError(text)
    return ProviderError(f"{action}: {type(exc).__name__}: {exc}")


def kube_call(action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call the Kubernetes client, translating its errors (blocking; run through `blocking`)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        raise kube_error(exc, action) from exc


def kube_api(kube: KubeClients, eks_cluster_name: str, region: str) -> k8s.ApiClient:
    """The EKS cluster's Kubernetes ApiClient (blocking), with AWS/token errors translated."""
    try:
        return kube.api_client(eks_cluster_name, region)
    except Exception as exc:
        raise translate(exc, f"reach the Kubernetes API of {eks_cluster_name}") from exc
