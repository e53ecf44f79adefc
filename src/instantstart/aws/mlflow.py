"""SageMaker managed MLflow: tracking servers (create, describe, delete, tags) and the server's MLflow REST API,
SigV4-signed for the `sagemaker-mlflow` service as a SageMaker tracking server requires (blocking, errors
translated)."""

from __future__ import annotations

import json
from typing import Any, cast
from urllib.parse import urlencode

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from instantstart import __version__
from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, error_code, translate
from instantstart.errors import DependencyFailed, NotFound

SIGNING_SERVICE = "sagemaker-mlflow"
_GONE = ("ResourceNotFound", "ResourceNotFoundException")
REST_TIMEOUT = 30.0


def describe_server(aws: AwsClients, region: str, name: str) -> dict[str, Any] | None:
    """DescribeMlflowTrackingServer, or None when there is no such server."""
    try:
        return cast("dict[str, Any]", aws.sagemaker(region).describe_mlflow_tracking_server(TrackingServerName=name))
    except Exception as exc:
        if error_code(exc) in _GONE:
            return None
        raise translate(exc, f"describe MLflow tracking server {name}") from exc


def create_server(aws: AwsClients, region: str, *, name: str, artifact_store_uri: str, role_arn: str, size: str,
                  tags: list[dict[str, str]]) -> str:
    """CreateMlflowTrackingServer; its ARN."""
    sm = aws.sagemaker(region)
    answer = call(f"create MLflow tracking server {name}", sm.create_mlflow_tracking_server,
                  TrackingServerName=name, ArtifactStoreUri=artifact_store_uri, RoleArn=role_arn,
                  TrackingServerSize=size, Tags=tags)
    return str(answer["TrackingServerArn"])


def delete_server(aws: AwsClients, region: str, name: str) -> None:
    """DeleteMlflowTrackingServer (gone already: nothing to do)."""
    try:
        aws.sagemaker(region).delete_mlflow_tracking_server(TrackingServerName=name)
    except Exception as exc:
        if error_code(exc) in _GONE:
            return
        raise translate(exc, f"delete MLflow tracking server {name}") from exc


def server_tags(aws: AwsClients, region: str, arn: str) -> dict[str, str]:
    """The tracking server's tags as a map."""
    answer = call(f"list the tags of {arn}", aws.sagemaker(region).list_tags, ResourceArn=arn)
    return {str(t["Key"]): str(t["Value"]) for t in answer.get("Tags") or []}


def rest(aws: AwsClients, region: str, url: str, path: str, *, params: dict[str, Any] | None = None,
         body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One MLflow REST call (`path` under /api/2.0/mlflow/) on the tracking server at `url`, SigV4-signed with the
    control plane's credentials; GET with `params`, else POST with `body`. A 404 RESOURCE_DOES_NOT_EXIST is
    NotFound."""
    full = f"{url.rstrip('/')}/api/2.0/mlflow/{path}"
    method = "GET" if body is None else "POST"
    if params:
        full += "?" + urlencode(params)
    data = None if body is None else json.dumps(body).encode()
    headers = {"User-Agent": f"instantstart/{__version__}"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    credentials = aws.session.get_credentials()
    if credentials is None:
        raise DependencyFailed("No AWS credentials to sign the MLflow request with.",
                               hint="Configure the control plane's AWS identity (account_doctor shows it).")
    signed = AWSRequest(method=method, url=full, data=data, headers=headers)
    SigV4Auth(credentials.get_frozen_credentials(), SIGNING_SERVICE, region).add_auth(signed)
    try:
        response = httpx.request(method, full, content=data, headers=dict(signed.headers.items()),
                                 timeout=REST_TIMEOUT)
    except httpx.HTTPError as exc:
        raise DependencyFailed(f"The MLflow tracking server at {url} did not answer: {exc}",
                               hint="Check the tracking server's status (mlflow_configure shows it).",
                               retryable=True) from exc
    if response.status_code == 404 and "RESOURCE_DOES_NOT_EXIST" in response.text:
        raise NotFound(f"MLflow: {_message(response)}")
    if response.status_code >= 400:
        raise DependencyFailed(f"MLflow {path} answered {response.status_code}: {_message(response)}",
                               hint="Allow sagemaker-mlflow:* on the tracking server for the control plane's "
                               "identity." if response.status_code == 403 else None,
                               retryable=response.status_code >= 500)
    answer: dict[str, Any] = response.json() if response.content else {}
    return answer


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message") or response.text[:300])
    except ValueError:
        return response.text[:300]
