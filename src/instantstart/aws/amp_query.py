"""Amazon Managed Service for Prometheus query API: PromQL instant and range queries, SigV4-signed (`aps`)."""

from __future__ import annotations

import json
from typing import Any, cast
from urllib.parse import quote, urlencode

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from instantstart import __version__
from instantstart.aws.clients import AwsClients
from instantstart.errors import InvalidInput, NotFound, PreconditionFailed, ProviderError, Throttled

TIMEOUT_SECONDS = 10.0
MAX_ANSWER_BYTES = 4 * 1024 * 1024


def workspace_url(aws: AwsClients, region: str, workspace_id: str, prometheus_endpoint: str | None) -> str:
    """The workspace's Prometheus endpoint (ending in "/"): its own, or under the endpoint override (the twin)."""
    override = aws.settings.aws_endpoint_url
    if override:
        return f"{override.rstrip('/')}/workspaces/{workspace_id}/"
    if prometheus_endpoint:
        return prometheus_endpoint if prometheus_endpoint.endswith("/") else prometheus_endpoint + "/"
    return f"https://aps-workspaces.{region}.amazonaws.com/workspaces/{workspace_id}/"


def _signed_get(aws: AwsClients, region: str, url: str) -> dict[str, str]:
    credentials = aws.session.get_credentials()
    if credentials is None:
        raise PreconditionFailed("No AWS credentials to sign the AMP query with.",
                                 hint="Configure credentials for the control plane (environment, profile or role).")
    request = AWSRequest(method="GET", url=url, headers={"User-Agent": f"python-httpx instantstart/{__version__}"})
    SigV4Auth(credentials.get_frozen_credentials(), "aps", region).add_auth(request)
    return {k: str(v) for k, v in request.headers.items()}


def query(aws: AwsClients, region: str, base_url: str, path: str, params: dict[str, str]) -> dict[str, Any]:
    """GET `{base_url}api/v1/{path}` (query or query_range) signed for `aps`; the answer's `data` (blocking).
    Errors are translated: 403 names aps:QueryMetrics, 404 the workspace, 429 is retryable, 400 names the query."""
    url = f"{base_url}api/v1/{path}?{urlencode(sorted(params.items()), quote_via=quote, safe='')}"
    action = f"query AMP workspace ({path})"
    try:
        with httpx.Client(timeout=TIMEOUT_SECONDS) as client:
            response = client.get(url, headers=_signed_get(aws, region, url))
    except httpx.HTTPError as exc:
        raise ProviderError(f"{action}: cannot reach {base_url}: {type(exc).__name__}: {exc}") from exc
    if len(response.content) > MAX_ANSWER_BYTES:
        raise ProviderError(f"{action}: the answer is larger than {MAX_ANSWER_BYTES} bytes", retryable=False,
                            hint="Ask for a shorter range or a coarser step.")
    try:
        body = cast("dict[str, Any]", response.json())
    except (ValueError, json.JSONDecodeError):
        body = {"error": response.text[:300]}
    message = str(body.get("error") or body.get("message") or body.get("Message") or response.reason_phrase)
    status = response.status_code
    if status == 403:
        raise PreconditionFailed(f"{action}: access denied: {message}",
                                 hint="The control plane's role needs aps:QueryMetrics on the workspace "
                                      "(scripts/policy_source.py renders it).")
    if status == 404:
        raise NotFound(f"{action}: the workspace does not exist: {message}",
                       hint="Enable the observability feature again (hyperpod_update_advanced_features).")
    if status == 429:
        raise Throttled(f"{action}: throttled: {message}")
    if status in (400, 422):
        raise InvalidInput(f"{action}: AMP refused the query: {message}",
                           hint="Use a shorter range or a coarser step.")
    if status >= 300 or body.get("status") != "success":
        raise ProviderError(f"{action}: HTTP {status}: {message}")
    return cast("dict[str, Any]", body.get("data") or {})
