"""Every IAM document the control plane writes: no mutating action on `Resource: "*"` without a condition, every
service trust carries confused-deputy conditions, and all documents come from manifests/iam_policies.py
(and iam_feature_policies.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from instantstart.manifests import iam_feature_policies as feature_pol
from instantstart.manifests import iam_policies as pol
from instantstart.twin_process import TwinProcess
from tests.support.flows import make_hyperpod
from tests.support.iam_documents import SCOPE, TRACKING_SERVER, every_generated_document
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

SRC = Path(__file__).resolve().parents[2] / "src" / "instantstart"
POLICY_MODULES = ("iam_policies.py", "iam_feature_policies.py")  # manifests/: every IAM document is built there
READ_ONLY = re.compile(r"^[a-z0-9-]+:(Describe|List|Get|BatchGet|BatchCheck|Head)")

# Justified exceptions: mutating actions allowed on "*" without a condition. Keep this list short and explained.
# Every cluster role (nodes, S3 CSI, Karpenter, trusts) is scoped; only these feature roles keep "*":
WILDCARD_EXCEPTIONS: dict[str, str] = {
    "cloudwatch:PutMetricData": "supports no resource-level permissions; it only appends metric data points",
}

def listed(value: Any) -> list[Any]:
    """IAM's "string or list" fields as a list."""
    return value if isinstance(value, list) else [value]


def violations(name: str, document: dict[str, Any]) -> list[str]:
    """What is wrong with one policy document (identity or trust)."""
    found = []
    for index, statement in enumerate(listed(document["Statement"])):
        where = f"{name}[{statement.get('Sid', index)}]"
        if statement.get("Effect") != "Allow":
            continue
        if "Principal" in statement:  # a trust policy statement
            services = listed(statement["Principal"].get("Service", []))
            condition = statement.get("Condition", {})
            keys = {k for block in condition.values() for k in block}
            if services and "aws:SourceAccount" not in keys:
                found.append(f"{where}: service trust {services} without aws:SourceAccount")
            if services and not keys & {"aws:SourceArn", "aws:RequestTag/eks-cluster-name"}:
                found.append(f"{where}: service trust {services} without aws:SourceArn (or the cluster session tag)")
            continue
        wildcard = "*" in listed(statement.get("Resource", []))
        if not wildcard or statement.get("Condition"):
            continue
        for action in listed(statement["Action"]):
            if "*" in action.split(":", 1)[1] and action not in WILDCARD_EXCEPTIONS:
                found.append(f"{where}: wildcard action {action} on Resource '*'")
            elif not READ_ONLY.match(action) and action not in WILDCARD_EXCEPTIONS:
                found.append(f"{where}: mutating {action} on Resource '*' without a condition")
    return found


def test_the_checker_catches_the_old_node_role() -> None:
    old = {"Statement": [{"Effect": "Allow", "Action": ["ec2:CreateTags", "ec2:DescribeTags"], "Resource": "*"}]}
    assert violations("old", old) == ["old[0]: mutating ec2:CreateTags on Resource '*' without a condition"]
    bare = {"Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "x"}]}
    assert len(violations("bare", bare)) == 2


@pytest.mark.parametrize("name", sorted(every_generated_document()))
def test_generated_documents_are_scoped(name: str) -> None:
    assert violations(name, every_generated_document()[name]) == []


def test_lifecycle_prefix_is_outside_every_writable_resource() -> None:
    lifecycle = f"arn:aws:s3:::{SCOPE.bucket}/{pol.lifecycle_prefix(SCOPE.cluster_tag)}on_create.sh"
    for name in ("execution_inline_policy", "csi_data_policy"):
        for statement in every_generated_document()[name]["Statement"]:
            if statement["Effect"] != "Allow":
                continue  # the lifecycle Deny names the prefix on purpose
            writes = [a for a in listed(statement["Action"]) if a.startswith("s3:") and not READ_ONLY.match(a)]
            for resource in listed(statement["Resource"]) if writes else []:
                pattern = re.escape(resource).replace(r"\*", ".*")
                assert not re.fullmatch(pattern, lifecycle), (name, statement)
                # Nor another cluster's data.
                assert not re.fullmatch(pattern, f"arn:aws:s3:::{SCOPE.bucket}/clusters/beta/data/x"), name


def test_no_policy_document_is_built_outside_the_policy_module() -> None:
    offenders = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path.name not in POLICY_MODULES and re.search(r"[\"']Statement[\"']\s*:", path.read_text())
    ]
    assert offenders == [], "build IAM documents in manifests/iam_policies.py (or iam_feature_policies.py)"


def test_every_policy_written_to_the_twin_is_scoped(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        make_hyperpod(client, "iampol")
        ref = client.post("/api/v1/clusters/dependencies", json={})
        assert ref.status_code == 202, ref.text
        assert wait_terminal(client, ref.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
    iam: Any = twin_client(twin, "iam")
    walked = 0
    for role in iam.list_roles()["Roles"]:
        name = role["RoleName"]
        trust = iam.get_role(RoleName=name)["Role"]["AssumeRolePolicyDocument"]
        trust = trust if isinstance(trust, dict) else json.loads(unquote(trust))
        assert violations(f"{name} trust", trust) == []
        for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
            document = iam.get_role_policy(RoleName=name, PolicyName=policy)["PolicyDocument"]
            assert violations(f"{name}/{policy}", document) == []
            walked += 1
    assert walked >= 2  # at least the execution role and the S3 CSI role


def test_a_claim_on_another_bucket_widens_the_csi_role_to_exactly_that_prefix() -> None:
    from hyperpod_twin.iam_eval import evaluate

    details = {
        "bucket": SCOPE.bucket,
        "storage": {
            "s3-claim": {"bucketName": SCOPE.bucket, "prefix": pol.data_prefix(SCOPE.cluster_tag)},
            "datasets": {"bucketName": "team-datasets", "prefix": "imagenet/"},
        },
    }
    grants = pol.claim_grants(details["bucket"], details["storage"])
    assert grants == [("team-datasets", "imagenet/")]
    policy = pol.csi_data_policy(SCOPE, grants)
    assert violations("widened", policy) == []
    assert evaluate([policy], "s3:PutObject", "arn:aws:s3:::team-datasets/imagenet/x.tar") == "Allow"
    assert evaluate([policy], "s3:PutObject", "arn:aws:s3:::team-datasets/private/x") == "ImplicitDeny"
    assert evaluate([policy], "s3:PutObject", "arn:aws:s3:::other-bucket/imagenet/x") == "ImplicitDeny"
    lifecycle = f"arn:aws:s3:::{SCOPE.bucket}/{pol.lifecycle_prefix(SCOPE.cluster_tag)}on_create.sh"
    assert evaluate([policy], "s3:PutObject", lifecycle) == "ExplicitDeny"  # the lifecycle Deny of every role
    listing = {"s3:prefix": "private/"}
    assert evaluate([policy], "s3:ListBucket", "arn:aws:s3:::team-datasets", listing) == "ImplicitDeny"
    assert evaluate([policy], "s3:ListBucket", "arn:aws:s3:::team-datasets", {"s3:prefix": "imagenet/a"}) == "Allow"
    # No claim elsewhere: the plain data-prefix policy.
    assert pol.csi_data_policy(SCOPE, pol.claim_grants(SCOPE.bucket, {})) == pol.csi_data_policy(SCOPE)


def test_the_mlflow_writer_role_reaches_its_tracking_server_only() -> None:
    document = feature_pol.mlflow_writer_policy(TRACKING_SERVER)
    allows = [s for s in document["Statement"] if s["Effect"] == "Allow"]  # beside the lifecycle Deny
    assert {r for s in allows for r in listed(s["Resource"])} == {TRACKING_SERVER}
    actions = {a for s in allows for a in listed(s["Action"])}
    assert actions == {"sagemaker-mlflow:*", "sagemaker:DescribeMlflowTrackingServer"}
    server = feature_pol.mlflow_server_policy("instantstart-123456789012-x", feature_pol.mlflow_prefix("alpha"))
    objects = next(s for s in server["Statement"] if s["Sid"] == "ArtifactObjects")
    assert objects["Resource"] == ["arn:aws:s3:::instantstart-123456789012-x/clusters/alpha/mlflow/*"], objects

