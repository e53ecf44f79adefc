"""Calling a model server at its Service's load balancer address (when the API server's proxy cannot carry its key)."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

import httpx

from instantstart.errors import InvalidInput, ProviderError, Timeout
from instantstart.validation import INVOCATION_PATH_RULE, invocation_path

# The DNS names AWS gives load balancers: `<name>.elb.<region>.amazonaws.com` (NLB, ALB) and
# `[internal-]<name>.<region>.elb.amazonaws.com` (classic), `.cn` in the China Regions.
ELB_HOSTNAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.){1,4}elb\.([a-z0-9-]{1,32}\.)?amazonaws\.com(\.cn)?$")
ADDRESS_RULE = ("an AWS load balancer DNS name (…elb…amazonaws.com) or an IP address that is not link-local "
                "(the instance metadata service), multicast, unspecified or reserved")


def _refused(what: str, value: str, rule: str) -> InvalidInput:
    return InvalidInput(f"Invalid input: {what}: {value[:100]!r} is not allowed for a load balancer call: must be "
                        f"{rule}. Nothing was sent.", hint=f"The {what} must be {rule}.",
                        details={"fields": [{"field": what, "message": f"must be {rule}"}]})


def balancer_url(address: str, port: int, path: str) -> str:
    """`http://<address>:<port>/<path>`, each part checked (InvalidInput, nothing sent): the address is an ELB DNS
    name or an IP that is not link-local (169.254.169.254 is the instance metadata service), multicast, unspecified
    or reserved; the port 1-65535; the path `validation.invocation_path` (no dot segments, no `%`, `?`, `#`)."""
    host = address.lower().rstrip(".")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if not ELB_HOSTNAME.match(host):
            raise _refused("address", address, ADDRESS_RULE) from None
    else:
        if ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved:
            raise _refused("address", address, ADDRESS_RULE)
        host = f"[{host}]" if ip.version == 6 else host
    if not 0 < port < 65536:
        raise _refused("port", str(port), "1-65535")
    try:
        segments = invocation_path(path)
    except ValueError:
        raise _refused("path", path, INVOCATION_PATH_RULE) from None
    return f"http://{host}:{port}/{segments}"


def balancer_request(address: str, port: int, path: str, *, body: dict[str, Any], api_key: str | None,
                     timeout: float = 60.0) -> tuple[int, Any]:
    """(HTTP status, parsed JSON or text) of `POST path` at a load balancer, with `Authorization: Bearer <api_key>`
    when given. Redirects are never followed (the key would go with them); an unreachable address raises
    ProviderError naming the likely cause (this control plane's address outside the Service's sourceRanges)."""
    url = balancer_url(address, port, path)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        answer = httpx.post(url, json=body, headers=headers, timeout=timeout, follow_redirects=False)
    except httpx.TimeoutException:
        raise Timeout(f"the load balancer {address}:{port} did not answer within {timeout:.0f}s.",
                      hint="Lower max_tokens, or check that this control plane's address is in the Service's "
                      "sourceRanges (its security group drops other addresses).") from None
    except httpx.HTTPError as exc:
        raise ProviderError(f"could not reach the load balancer {address}:{port}: {type(exc).__name__}",
                            hint="The address must be in the Service's sourceRanges and reachable from this "
                            "control plane (an internal load balancer only from inside the VPC).",
                            retryable=True) from None
    try:
        return answer.status_code, json.loads(answer.content or b"null")
    except ValueError:
        return answer.status_code, answer.content.decode(errors="replace")[:2000]
