"""Without --twin: boto3's default chain and Region, adaptive retries, AWS's own endpoints (no override)."""

from __future__ import annotations

from pathlib import Path

import pytest

from instantstart.aws.clients import AwsClients
from instantstart.settings import Settings


@pytest.fixture
def real_account_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The environment of a machine pointed at AWS: no endpoint override anywhere, a profile file."""
    for name in ("AWS_ENDPOINT_URL", "INSTANTSTART_AWS_ENDPOINT_URL", "INSTANTSTART_AWS_REGION", "AWS_REGION",
                 "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config"
    config.write_text("[profile research]\nregion = ap-northeast-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))


def test_region_comes_from_the_environment(real_account_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert Settings().aws_region == "eu-west-1"


def test_region_comes_from_the_profile(real_account_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "research")
    assert Settings().aws_region == "ap-northeast-1"


def test_instantstart_region_overrides_and_us_west_2_is_the_last_resort(
    real_account_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings().aws_region == "us-west-2"
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("INSTANTSTART_AWS_REGION", "us-east-2")
    assert Settings().aws_region == "us-east-2"


def test_clients_use_aws_endpoints_and_adaptive_retries(
    real_account_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    aws = AwsClients(Settings())
    sagemaker = aws.client("sagemaker")
    assert sagemaker.meta.endpoint_url == "https://api.sagemaker.eu-west-1.amazonaws.com"
    assert sagemaker.meta.config.retries["mode"] == "adaptive"
    assert aws.client("eks", "us-east-1").meta.endpoint_url == "https://eks.us-east-1.amazonaws.com"
    assert aws.client("sagemaker") is sagemaker


def test_warming_builds_the_default_regions_clients_the_requests_then_reuse(
    real_account_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    aws = AwsClients(Settings())
    aws.warm(("ec2", "service-quotas"))
    built = dict(aws._clients)
    assert set(built) == {("ec2", "eu-west-1"), ("service-quotas", "eu-west-1")}
    assert aws.ec2() is built[("ec2", "eu-west-1")] and aws.quotas() is built[("service-quotas", "eu-west-1")]
    assert aws.ec2().meta.endpoint_url == "https://ec2.eu-west-1.amazonaws.com"
