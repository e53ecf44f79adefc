"""The installation id on what the control plane creates beyond the network and IAM roles (EKS cluster, add-ons,
OIDC provider, HyperPod cluster), and a same-named resource of another installation refused before adoption."""

from __future__ import annotations

from typing import Any

from instantstart.twin_process import TwinProcess
from tests.support.flows import make_eks, make_hyperpod
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

KEY = "instantstart:installation"


def test_everything_created_carries_the_installation_id(cp: Running, twin: TwinProcess) -> None:
    eks: Any = twin_client(twin, "eks")
    sagemaker: Any = twin_client(twin, "sagemaker")
    iam: Any = twin_client(twin, "iam")
    with cp.client() as client:
        make_hyperpod(client, "it1")
        ref = client.post("/api/v1/clusters/dependencies", json={})
        assert wait_terminal(client, ref.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
        details = client.get("/api/v1/clusters/eks-status").json()["details"]
    cluster = eks.describe_cluster(name="eks-cluster-it1")["cluster"]
    mine = cluster["tags"][KEY]
    assert mine.startswith("is-") and cluster["tags"]["instantstart:cluster-tag"] == "it1"
    addons = eks.list_addons(clusterName="eks-cluster-it1")["addons"]
    assert addons
    for addon in addons:
        assert eks.describe_addon(clusterName="eks-cluster-it1", addonName=addon)["addon"]["tags"][KEY] == mine
    arn = sagemaker.describe_cluster(ClusterName=details.get("hyperpodClusterName") or "hp-cluster-it1")["ClusterArn"]
    hp_tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]}
    assert hp_tags[KEY] == mine
    providers = iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]
    host = cluster["identity"]["oidc"]["issuer"].removeprefix("https://")
    ours = [p["Arn"] for p in providers if p["Arn"].endswith(host)]
    assert len(ours) == 1
    tags = {t["Key"]: t["Value"] for t in iam.get_open_id_connect_provider(OpenIDConnectProviderArn=ours[0])["Tags"]}
    assert tags[KEY] == mine


def test_an_eks_cluster_of_another_installation_is_not_adopted(cp: Running, twin: TwinProcess) -> None:
    eks: Any = twin_client(twin, "eks")
    with cp.client() as client:
        make_eks(client, "it2")  # this installation's cluster, to learn its network and role
        ours = eks.describe_cluster(name="eks-cluster-it2")["cluster"]
        # Another installation made eks-cluster-it3 first.
        eks.create_cluster(
            name="eks-cluster-it3", roleArn=ours["roleArn"],
            resourcesVpcConfig={"subnetIds": ours["resourcesVpcConfig"]["subnetIds"]},
            tags={"instantstart:cluster-tag": "it3", KEY: "is-0000000000000000"},
        )
        ref = client.post("/api/v1/clusters/eks", json={"clusterTag": "it3"}).json()
        view = wait_terminal(client, ref["operationId"], timeout=180)
    assert view["status"] == "FAILED" and view["error"]["code"] == "CONFLICT", view
    assert "another InstantStart installation" in view["error"]["message"], view
    assert eks.describe_cluster(name="eks-cluster-it3")["cluster"]["tags"][KEY] == "is-0000000000000000"
