"""Calling a Service through the Kubernetes API server's service proxy (no port-forward, no public endpoint)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from instantstart.errors import NotFound, ProviderError, Timeout
from instantstart.kube import k8s


def service_request(
    api: k8s.ApiClient,
    namespace: str,
    service: str,
    port: int | str,
    path: str,
    *,
    method: str = "POST",
    body: dict[str, Any] | None = None,
    timeout: float = 60.0,
) -> tuple[int, Any]:
    """(HTTP status, parsed JSON or text) of `method path` on `service:port` through the API server's proxy.

    A 503/404 from the API server itself (no ready endpoints, no such Service) raises; the backend's own error
    statuses are returned so the caller can explain them."""
    resource = (
        f"/api/v1/namespaces/{quote(namespace, safe='')}/services/{quote(service, safe='')}:{port}/proxy/"
        + path.lstrip("/")
    )
    try:
        serialized = api.param_serialize(
            method=method,
            resource_path=resource,
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = api.call_api(*serialized, _request_timeout=timeout)
        response.read()  # type: ignore[no-untyped-call]
    except k8s.ApiException as exc:
        raise ProviderError(f"calling {namespace}/{service}: HTTP {exc.status}: {exc.reason}") from None
    except Exception as exc:
        if "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower():
            raise Timeout(f"{service} did not answer within {timeout:.0f}s.",
                          hint="Raise the timeout or lower max_tokens.") from None
        raise ProviderError(f"calling {namespace}/{service}: {type(exc).__name__}: {exc}") from None
    status = int(response.status)
    data: bytes = response.data or b""
    text = data.decode(errors="replace")[:500]
    if status == 404 and '"kind":"Status"' in text.replace(" ", "") and "services" in text:
        raise NotFound(f"Service {namespace}/{service} does not exist.",
                       hint="inference_list_services lists the deployed models.")
    if status in (502, 503) and '"kind":"Status"' in text.replace(" ", ""):
        raise ProviderError(f"Service {namespace}/{service} has no ready endpoint yet ({status}).",
                            hint="Wait until the deployment is Ready (operation_get), then call again.",
                            retryable=True)
    return status, _parse(data)


def _parse(data: bytes) -> Any:
    try:
        return json.loads(data or b"null")
    except ValueError:
        return data.decode(errors="replace")[:2000]
