"""SageMaker runtime: InvokeEndpoint on an endpoint the HyperPod inference operator registered (blocking)."""

from __future__ import annotations

import json
from typing import Any

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call


def invoke_endpoint(aws: AwsClients, region: str, endpoint: str, body: dict[str, Any]) -> Any:
    """InvokeEndpoint with a JSON body; the answer parsed as JSON (its text when it is not JSON)."""
    runtime = aws.client("sagemaker-runtime", region)
    answer = call(f"invoke SageMaker endpoint {endpoint}", runtime.invoke_endpoint, EndpointName=endpoint,
                  ContentType="application/json", Accept="application/json", Body=json.dumps(body).encode())
    data: bytes = answer["Body"].read()
    try:
        return json.loads(data or b"null")
    except ValueError:
        return data.decode(errors="replace")[:2000]
