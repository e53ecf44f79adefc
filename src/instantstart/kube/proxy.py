"""Calling a Service through the Kubernetes API server's service proxy (no port-forward, no public endpoint)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from instantstart.errors import InvalidInput, NotFound, ProviderError, Timeout
from instantstart.kube import k8s
from instantstart.validation import DNS1123_LABEL_RE, INVOCATION_PATH_RULE, invocation_path

_PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$")  # a Kubernetes port name: 1-15, a letter


def proxy_resource(namespace: str, service: str, port: int | str, path: str) -> str:
    """The API path `/api/v1/namespaces/<ns>/services/<svc>:<port>/proxy/<path>`, each part checked and quoted.

    Refused (InvalidInput, nothing sent): a namespace or Service that is not a DNS-1123 label, a port that is
    neither 1-65535 nor a port name, and a path with an empty, `.` or `..` segment or any character outside
    letters, digits, '-', '_' and '/' (so no `%`, `?`, `#` or `\\`). The HTTP client resolves `.`/`..` segments
    (and the API server decodes `%2e%2e`), so a path with one would leave the Service's proxy for any API path,
    such as a node's kubelet `/run` through `/api/v1/nodes/<node>/proxy`."""
    for what, value in (("namespace", namespace), ("service", service)):
        if not DNS1123_LABEL_RE.match(value):
            raise _refused(what, value, "a DNS-1123 label (lower-case letters, digits, '-'; at most 63)")
    port_text = str(port)
    numeric = port_text.isdigit()
    if (numeric and not 0 < int(port_text) < 65536) or (not numeric and not _PORT_NAME.match(port_text)):
        raise _refused("port", port_text, "1-65535 or a port name (IANA_SVC_NAME)")
    try:
        segments = invocation_path(path).split("/")
    except ValueError:
        raise _refused("path", path, INVOCATION_PATH_RULE) from None
    return (f"/api/v1/namespaces/{quote(namespace, safe='')}/services/{quote(service, safe='')}:{port_text}/proxy/"
            + "/".join(quote(s, safe="") for s in segments))


def _refused(what: str, value: str, rule: str) -> InvalidInput:
    return InvalidInput(f"Invalid input: {what}: {value[:100]!r} is not allowed in a service proxy request: must be "
                        f"{rule}. Nothing was sent.", hint=f"Give a {what} that is {rule}.",
                        details={"fields": [{"field": what, "message": f"must be {rule}"}]})


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
    statuses are returned so the caller can explain them. The URL is built by `proxy_resource` (which refuses
    dot segments and encoded characters before anything is sent)."""
    resource = proxy_resource(namespace, service, port, path)
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
