"""`instantstart doctor` against the twin: every check ok on a prepared account; each problem with its hint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from instantstart.cli.main import build_app
from instantstart.settings import Settings
from instantstart.store.db import Database
from instantstart.twin_process import TwinProcess
from tests.support.twin import twin_client

SLR_SERVICE = "hyperpod.sagemaker.amazonaws.com"


def doctor(twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, list[Any]]:
    """Run `instantstart doctor -o json` in-process with the default chain pointed at the twin."""
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("INSTANTSTART_AWS_ENDPOINT_URL", twin.endpoint_url)
    monkeypatch.delenv("INSTANTSTART_AWS_REGION", raising=False)
    settings = Settings(data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'state.db'}")
    result = CliRunner().invoke(build_app(settings), ["doctor", "-o", "json", *args])
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture
def migrated(tmp_path: Path) -> None:
    """The database `instantstart serve` would have migrated."""
    db = Database(f"sqlite:///{tmp_path / 'state.db'}")
    db.migrate()
    db.dispose()


def by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks}


def test_prepared_twin_account_is_all_ok(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migrated: None
) -> None:
    twin_client(twin, "iam").create_service_linked_role(AWSServiceName=SLR_SERVICE)
    code, checks = doctor(twin, tmp_path, monkeypatch, "--instance-type", "ml.g5.8xlarge=2")
    found = by_name(checks)
    assert code == 0, checks
    assert [c for c in checks if c["status"] == "problem"] == []
    assert found["identity"]["message"].startswith(f"account {twin.info['account_id']}")
    assert "long-term credentials" in found["identity"]["message"]
    assert found["region"]["message"] == twin.env["AWS_REGION"]
    assert found["service-linked role"]["message"].endswith("/AWSServiceRoleForSageMakerHyperPod")
    boundary = f"arn:aws:iam::{twin.info['account_id']}:policy/InstantStartPermissionsBoundary"
    assert found["permissions boundary"] == {"name": "permissions boundary", "status": "ok", "message": boundary,
                                             "hint": None}
    assert found["quota ml.g5.8xlarge"]["status"] == "ok"
    assert found["VPC quota"]["status"] == "ok"
    assert found["project bucket"]["message"].endswith(f"is owned by {twin.info['account_id']}.")
    assert found["helm"]["message"].startswith("v3.")
    assert found["database"]["status"] == "ok"
    # moto has no policy simulator: doctor says it could not check rather than claiming success.
    assert found["permissions"]["status"] == "unknown"
    assert "iam:SimulatePrincipalPolicy" in found["permissions"]["message"]


def test_a_quota_too_low_fails_that_check_with_its_hint(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migrated: None
) -> None:
    twin_client(twin, "iam").create_service_linked_role(AWSServiceName=SLR_SERVICE)
    low = {"instance_type": "ml.p5.48xlarge", "value": 1}
    httpx.post(twin.endpoint_url + "/_twin/quotas", json=low).raise_for_status()
    code, checks = doctor(
        twin, tmp_path, monkeypatch, "--instance-type", "ml.p5.48xlarge=2", "--instance-type", "ml.g5.8xlarge"
    )
    found = by_name(checks)
    assert code == 1
    assert found["quota ml.p5.48xlarge"]["status"] == "problem"
    assert found["quota ml.p5.48xlarge"]["message"] == "'ml.p5.48xlarge for cluster usage' is 1; 2 needed."
    assert "Request an increase of the SageMaker quota 'ml.p5.48xlarge for cluster usage'" in (
        found["quota ml.p5.48xlarge"]["hint"]
    )
    assert found["quota ml.g5.8xlarge"]["status"] == "ok"
    assert [c["name"] for c in checks if c["status"] == "problem"] == ["quota ml.p5.48xlarge"]


def test_missing_boundary_and_full_vpc_quota_are_problems_a_missing_role_and_database_information(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An account whose operator never created the permissions boundary.
    iam = twin_client(twin, "iam")
    iam.delete_policy(PolicyArn=f"arn:aws:iam::{twin.info['account_id']}:policy/InstantStartPermissionsBoundary")
    httpx.post(
        twin.endpoint_url + "/_twin/quotas", json={"service_code": "vpc", "quota_name": "VPCs per Region", "value": 1}
    ).raise_for_status()
    code, checks = doctor(twin, tmp_path, monkeypatch)
    found = by_name(checks)
    assert code == 1
    # What the first cluster or `serve` makes is information, not a problem.
    assert found["service-linked role"]["status"] == "info"
    assert "creates it with the first HyperPod cluster" in found["service-linked role"]["message"]
    assert "create-service-linked-role --aws-service-name hyperpod.sagemaker.amazonaws.com" in (
        found["service-linked role"]["hint"]
    )
    assert found["database"]["status"] == "info"
    assert "`instantstart serve` creates it" in found["database"]["message"]
    assert found["VPC quota"]["status"] == "problem"
    assert found["permissions boundary"]["status"] == "problem"
    assert "can create no IAM role" in found["permissions boundary"]["message"]
    assert "file://deploy/iam/permissions-boundary.json" in found["permissions boundary"]["hint"]
    assert not any(name.startswith("quota ") for name in found)


def test_a_bad_instance_type_option_names_the_form() -> None:
    result = CliRunner().invoke(build_app(Settings()), ["doctor", "--instance-type", "p5=x"])
    assert result.exit_code == 2
    assert "TYPE=COUNT" in result.output


def test_doctor_twin_passes_on_a_fresh_twin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("INSTANTSTART_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL", "INSTANTSTART_AWS_REGION"):
        monkeypatch.setenv(name, "recorded")  # so that monkeypatch restores (or removes) it after the test
        monkeypatch.delenv(name)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.setenv(name, "restored-after-the-test")  # --twin points this process's environment at its twin
    settings = Settings(data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'fresh.db'}")
    result = CliRunner().invoke(build_app(settings), ["doctor", "--twin", "-o", "json"])
    checks = json.loads(result.stdout)
    assert result.exit_code == 0, checks
    assert {c["name"]: c["status"] for c in checks if c["status"] != "ok"} == {
        "service-linked role": "info", "database": "info", "permissions": "unknown"}
