"""The twin's SageMaker MLflow tracking servers: validation, Creating until the twin clock and the real server
allow, tags, and the TrackingServerUrl proxy refusing requests not SigV4-signed for sagemaker-mlflow."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin

ROLE = "arn:aws:iam::123456789012:role/instantstart-t-mlflow-server"


def signed(url: str, service: str) -> dict[str, str]:
    request = AWSRequest(method="GET", url=url, headers={})
    SigV4Auth(Credentials("testing", "testing"), service, "us-west-2").add_auth(request)
    return dict(request.headers.items())


def test_tracking_server_api_and_its_signed_url(twin: Twin) -> None:
    sm: Any = twin.boto3_client("sagemaker")
    with pytest.raises(ClientError, match=r"(?i)artifactStoreUri"):
        sm.create_mlflow_tracking_server(TrackingServerName="ts", ArtifactStoreUri="/tmp/x", RoleArn=ROLE)
    with pytest.raises(ClientError, match=r"(?i)trackingServerName"):
        sm.create_mlflow_tracking_server(TrackingServerName="bad_name", ArtifactStoreUri="s3://b/p", RoleArn=ROLE)
    arn = sm.create_mlflow_tracking_server(TrackingServerName="ts", ArtifactStoreUri="s3://b/p/", RoleArn=ROLE,
                                           Tags=[{"Key": "k", "Value": "v"}])["TrackingServerArn"]
    assert arn.endswith(":mlflow-tracking-server/ts")
    with pytest.raises(ClientError) as again:
        sm.create_mlflow_tracking_server(TrackingServerName="ts", ArtifactStoreUri="s3://b/p/", RoleArn=ROLE)
    assert again.value.response["Error"]["Code"] == "ResourceInUse"
    server = sm.describe_mlflow_tracking_server(TrackingServerName="ts")
    assert server["TrackingServerStatus"] == "Creating"  # the twin clock barely moves here
    assert [s["TrackingServerName"] for s in sm.list_mlflow_tracking_servers()["TrackingServerSummaries"]] == ["ts"]
    assert sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "k", "Value": "v"}]
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": "k2", "Value": "w"}])
    assert {t["Key"] for t in sm.list_tags(ResourceArn=arn)["Tags"]} == {"k", "k2"}

    url = server["TrackingServerUrl"] + "/api/2.0/mlflow/experiments/search"
    assert httpx.get(url, timeout=10).status_code == 403
    assert httpx.get(url, headers=signed(url, "sagemaker"), timeout=10).status_code == 403
    assert httpx.get(url, headers=signed(url, "sagemaker-mlflow"), timeout=10).status_code == 404  # not Created
    with pytest.raises(ClientError, match="not Created"):
        sm.create_presigned_mlflow_tracking_server_url(TrackingServerName="ts")
    assert sm.delete_mlflow_tracking_server(TrackingServerName="ts")["TrackingServerArn"] == arn
    with pytest.raises(ClientError) as gone:
        sm.describe_mlflow_tracking_server(TrackingServerName="ts")
    assert gone.value.response["Error"]["Code"] == "ResourceNotFound"
