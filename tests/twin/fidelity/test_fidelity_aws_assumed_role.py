"""The assumed-role caller profile: the twin's credentials answer as a role session, EKS canonicalises the
session to its role for the creator's access entry, and the Kubernetes side maps the token the same way."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest

from hyperpod_twin.twin import Twin, TwinConfig
from tests.support.eks_token import eks_token
from tests.support.twin_aws import advance, build_network

ROLE_ARN = "arn:aws:iam::111122223333:role/InstantStartTwinOperator"


@pytest.fixture(scope="module")
def role_twin() -> Iterator[Twin]:
    """A full twin (Kubernetes servers included) whose caller is an assumed-role session."""
    t = Twin(TwinConfig(clock_scale=0.001, caller="assumed-role")).start()
    try:
        yield t
    finally:
        t.stop()


def test_caller_is_an_assumed_role_session(role_twin: Twin) -> None:
    who = role_twin.boto3_client("sts").get_caller_identity()
    assert who["Arn"] == "arn:aws:sts::111122223333:assumed-role/InstantStartTwinOperator/instantstart"
    assert who["UserId"].startswith("AROA") and who["UserId"].endswith(":instantstart")
    # The role the session belongs to exists in the account.
    assert role_twin.boto3_client("iam").get_role(RoleName="InstantStartTwinOperator")["Role"]["Arn"] == ROLE_ARN


def test_creator_entry_is_the_role_and_the_session_is_refused(role_twin: Twin, tmp_path: object) -> None:
    net = build_network(role_twin)
    eks = role_twin.boto3_client("eks")
    eks.create_cluster(name="by-role", roleArn="arn:aws:iam::111122223333:role/eks-cluster",
                       resourcesVpcConfig={"subnetIds": net.eks_private, "securityGroupIds": [net.sg]},
                       accessConfig={"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True})
    advance(role_twin, 601)
    assert eks.list_access_entries(clusterName="by-role")["accessEntries"] == [ROLE_ARN]
    with pytest.raises(eks.exceptions.InvalidParameterException):
        eks.create_access_entry(clusterName="by-role", principalArn=role_twin.caller_arn)
    # A token signed with the session's credentials authenticates as the role's entry.
    cluster = eks.describe_cluster(name="by-role")["cluster"]
    import base64
    import pathlib
    import tempfile

    ca = pathlib.Path(tempfile.mkdtemp()) / "ca.crt"
    ca.write_bytes(base64.b64decode(cluster["certificateAuthority"]["data"]))
    config = kubernetes.client.Configuration()
    config.host = cluster["endpoint"]
    config.ssl_ca_cert = str(ca)
    token = eks_token("by-role", access_key=role_twin.access_key_id, secret_key=role_twin.secret_access_key,
                      region=role_twin.region, endpoint_url=role_twin.endpoint_url)
    config.api_key = {"authorization": "Bearer " + token}
    with kubernetes.client.ApiClient(config) as api:
        namespaces = kubernetes.client.CoreV1Api(api).list_namespace()
    assert "kube-system" in {n.metadata.name for n in namespaces.items}
