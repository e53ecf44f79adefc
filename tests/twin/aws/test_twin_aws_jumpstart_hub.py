"""The twin's JumpStart public hub (DescribeHubContent) and the control plane's hub adapter reading it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin
from instantstart.aws.clients import AwsClients
from instantstart.aws.jumpstart_hub import describe_model
from instantstart.settings import Settings


def test_describe_hub_content_answers_the_public_hubs_models(twin: Twin) -> None:
    sm: Any = twin.boto3_client("sagemaker")
    got = sm.describe_hub_content(HubName="SageMakerPublicHub", HubContentType="Model",
                                  HubContentName="deepseek-llm-r1-distill-qwen-1-5b")
    assert got["HubContentVersion"] == "1.1.1" and got["HubContentStatus"] == "Available"
    assert got["HubArn"] == "arn:aws:sagemaker:us-west-2:aws:hub/SageMakerPublicHub"
    doc = json.loads(got["HubContentDocument"])
    assert doc["DefaultInferenceInstanceType"] == "ml.g6.2xlarge"
    assert "ml.g6.4xlarge" in doc["SupportedInferenceInstanceTypes"]
    by_arn = sm.describe_hub_content(HubName="arn:aws:sagemaker:us-west-2:aws:hub/SageMakerPublicHub",
                                     HubContentType="Model", HubContentName="huggingface-llm-mistral-7b-instruct",
                                     HubContentVersion="3.12.0")
    assert by_arn["HubContentArn"].endswith(":aws:hub-content/SageMakerPublicHub/Model/"
                                            "huggingface-llm-mistral-7b-instruct/3.12.0")
    for args in ({"HubContentName": "no-such-model"}, {"HubContentName": "huggingface-llm-mistral-7b-instruct",
                                                        "HubContentVersion": "9.9.9"},
                 {"HubName": "my-private-hub", "HubContentName": "huggingface-llm-mistral-7b-instruct"}):
        with pytest.raises(ClientError) as info:
            sm.describe_hub_content(**{"HubName": "SageMakerPublicHub", "HubContentType": "Model", **args})
        assert info.value.response["Error"]["Code"] == "ResourceNotFound"
    with pytest.raises(ClientError, match=r"at 'hubContentName' failed to satisfy constraint"):
        sm.describe_hub_content(HubName="SageMakerPublicHub", HubContentType="Model", HubContentName="bad_name")


def test_the_hub_adapter_reads_supported_types_and_treats_an_unknown_model_as_absent(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in twin.env().items():
        monkeypatch.setenv(key, value)
    aws = AwsClients(Settings(aws_endpoint_url=twin.endpoint_url))
    model = describe_model(aws, "us-west-2", "huggingface-llm-qwen2-5-7b-instruct")
    assert model is not None and model.version == "1.27.2" and model.default_type == "ml.g5.12xlarge"
    assert "ml.g6.4xlarge" not in model.supported_types and "ml.g6.12xlarge" in model.supported_types
    assert describe_model(aws, "us-west-2", "huggingface-llm-qwen2-5-7b-instruct", "1.0.0") is None
    assert describe_model(aws, "us-west-2", "not-a-jumpstart-model") is None
