"""Identity as EKS checks it: access entries need an existing IAM role or user (never an STS session),
node entry types need a role, and pod identity associations need an existing role."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin
from tests.support.twin_aws import Net, build_eks, build_network, ensure_role


@pytest.fixture(scope="module")
def cluster(aws_twin: Twin) -> Iterator[str]:
    """An ACTIVE API-mode EKS cluster `ident`."""
    net: Net = build_network(aws_twin)
    build_eks(aws_twin, net, "ident", mode="API")
    yield "ident"


def _code(call: object, **kwargs: object) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kwargs)  # type: ignore[operator]
    error = info.value.response["Error"]
    return str(error["Code"]), str(error["Message"])


@pytest.mark.parametrize(
    ("principal", "kind", "wording"),
    [
        ("arn:aws:sts::111122223333:assumed-role/eks-cluster/session-1", "STANDARD", "assumed-role session"),
        ("arn:aws:iam::111122223333:role/no-such-role", "STANDARD", "could not be found"),
        ("arn:aws:iam::111122223333:user/nobody", "STANDARD", "could not be found"),
        ("arn:aws:iam::111122223333:user/instantstart-twin", "HYPERPOD_LINUX", "require an IAM role"),
    ],
    ids=["sts-session", "missing-role", "missing-user", "node-type-user"],
)
def test_access_entry_principals_are_checked(aws_twin: Twin, cluster: str, principal: str, kind: str,
                                             wording: str) -> None:
    eks = aws_twin.boto3_client("eks")
    code, message = _code(eks.create_access_entry, clusterName=cluster, principalArn=principal, type=kind)
    assert code == "InvalidParameterException" and wording in message


def test_existing_role_and_user_are_accepted(aws_twin: Twin, cluster: str) -> None:
    eks = aws_twin.boto3_client("eks")
    role = ensure_role(aws_twin, "ident-admin", "ec2.amazonaws.com")
    assert eks.create_access_entry(clusterName=cluster, principalArn=role)["accessEntry"]["principalArn"] == role
    user = aws_twin.boto3_client("iam").create_user(UserName="ident-user")["User"]["Arn"]
    assert eks.create_access_entry(clusterName=cluster, principalArn=user)["accessEntry"]["type"] == "STANDARD"


def test_pod_identity_role_must_exist(aws_twin: Twin, cluster: str) -> None:
    eks = aws_twin.boto3_client("eks")
    code, message = _code(eks.create_pod_identity_association, clusterName=cluster, namespace="default",
                          serviceAccount="sa", roleArn="arn:aws:iam::111122223333:role/ghost")
    assert code == "InvalidParameterException" and "does not exist" in message
    role = ensure_role(aws_twin, "ident-pods", "pods.eks.amazonaws.com")
    made = eks.create_pod_identity_association(clusterName=cluster, namespace="default", serviceAccount="sa",
                                               roleArn=role)
    assert made["association"]["roleArn"] == role
