"""Advanced features end to end on one shared twin cluster: the agent request, IRSA chain, explicit diff,
owner ledger (the stale cert-manager value), refusals, no-op writes, faults + retry, drift and disabling."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s

from instantstart.manifests.iam_feature_policies import fsx_csi_policy
from instantstart.twin_process import TwinProcess
from tests.support.flows import add_group, kube, make_hyperpod, mcp_calls, mcp_wait
from tests.support.role_usage import recorded_uses, role_log
from tests.support.servers import Running
from tests.support.twin import shared_control_plane, twin_client
from tests.support.waits import until, wait_terminal

TAG = "af1"
ROLE = f"instantstart-{TAG}-checkpointing"
TRAINING = "amazon-sagemaker-hyperpod-training-operator"
OBSERVABILITY = "amazon-sagemaker-hyperpod-observability"


def _cluster_with_dependencies(client: httpx.Client) -> None:
    make_hyperpod(client, TAG)
    deps = client.post("/api/v1/clusters/dependencies", json={})
    assert wait_terminal(client, deps.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"


# One control plane and one HyperPod cluster for the whole module (the costly part, done once).
shared_cp = shared_control_plane(_cluster_with_dependencies, status_cache_seconds=0.5)


@pytest.fixture(scope="module")
def shared(shared_cp: Running, twin_process: TwinProcess) -> tuple[Running, TwinProcess]:
    """The module's control plane and the twin it runs on."""
    return shared_cp, twin_process


def features(client: httpx.Client) -> dict[str, Any]:
    """hyperpod_get_advanced_features through REST."""
    response = client.get("/api/v1/capacity/advanced-features")
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    return payload


def update(client: httpx.Client, body: dict[str, Any], timeout: float = 240) -> dict[str, Any]:
    """hyperpod_update_advanced_features through REST, to a terminal operation view."""
    ref = client.post("/api/v1/capacity/advanced-features", json=body)
    assert ref.status_code == 202, ref.text
    return wait_terminal(client, ref.json()["operationId"], timeout=timeout)


def by_key(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-feature results of a finished operation."""
    return {f["key"]: f for f in (view.get("result") or {}).get("features", [])}


def test_agent_request_turns_both_on_and_tiered_storage_off_leaves_nothing(
    shared: tuple[Running, TwinProcess], tmp_path: Path
) -> None:
    cp, twin = shared
    iam: Any = twin_client(twin, "iam")
    sm: Any = twin_client(twin, "sagemaker")
    body = {"tieredStorage": {"enabled": True, "configMode": "default"}, "trainingOperator": {"enabled": True}}
    [ref] = mcp_calls(cp, [("hyperpod_update_advanced_features", body)])
    assert ref["statusTool"] == "hyperpod_get_advanced_features"
    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    results = by_key(view)
    assert set(results) == {"tieredStorage", "trainingOperator"}
    assert results["trainingOperator"]["status"] == "SUCCEEDED" and results["trainingOperator"]["action"] == "enabled"
    [state] = mcp_calls(cp, [("hyperpod_get_advanced_features", {})])
    training = state["trainingOperator"]
    assert training["enabled"] and training["state"] == "ENABLED", training
    assert training["actual"]["crds"][0]["served"] and training["actual"]["controllers"][0]["ready"]
    assert training["actual"]["identity"]["association"]["roleArn"] == training["actual"]["identity"]["roleArn"]
    assert training["owners"]["cert-manager"] == ["trainingOperator"]
    assert "cluster" in training["owners"]["eks-pod-identity-agent"]
    chain = {link["link"]: link for link in state["tieredStorage"]["actual"]["chain"]}
    assert all(link["ok"] for link in chain.values()), chain
    assert state["tieredStorage"]["state"] == "ENABLED"
    assert state["certManager"]["enabled"] and not state["kuberayOperator"]["enabled"]
    cluster = sm.describe_cluster(ClusterName=f"hp-cluster-{TAG}")
    assert cluster["TieredStorageConfig"]["Mode"] == "Enable"
    trust = iam.get_role(RoleName=ROLE)["Role"]["AssumeRolePolicyDocument"]
    [statement] = trust["Statement"]
    issuer = twin_client(twin, "eks").describe_cluster(name=f"eks-cluster-{TAG}")["cluster"]["identity"]["oidc"]
    host = issuer["issuer"].removeprefix("https://")
    subject = "system:serviceaccount:default:hyperpod-checkpointing"
    assert statement["Condition"]["StringEquals"] == {f"{host}:sub": subject, f"{host}:aud": "sts.amazonaws.com"}
    core = kube(twin, tmp_path, TAG)
    sa = core.read_namespaced_service_account("hyperpod-checkpointing", "default")
    assert sa.metadata.annotations["eks.amazonaws.com/role-arn"] == iam.get_role(RoleName=ROLE)["Role"]["Arn"]

    # A pod using that service account can assume the role with its projected token; another cannot.
    sts: Any = twin_client(twin, "sts")
    role_arn = iam.get_role(RoleName=ROLE)["Role"]["Arn"]
    tokens = {}
    for pod, account in (("ckpt", "hyperpod-checkpointing"), ("other", "default")):
        core.create_namespaced_pod("default", {"metadata": {"name": pod}, "spec": {
            "serviceAccountName": account, "containers": [{"name": "c", "image": "busybox"}]}})
        env = {e.name: e.value for e in core.read_namespaced_pod(pod, "default").spec.containers[0].env or []}
        assert (env.get("AWS_ROLE_ARN") == role_arn) is (account == "hyperpod-checkpointing"), env
        request = {"spec": {"audiences": ["sts.amazonaws.com"], "boundObjectRef": {"kind": "Pod", "name": pod}}}
        tokens[pod] = core.create_namespaced_service_account_token(account, "default", request).status.token
    creds = sts.assume_role_with_web_identity(RoleArn=role_arn, RoleSessionName="ckpt",
                                              WebIdentityToken=tokens["ckpt"])
    assert creds["Credentials"]["AccessKeyId"]
    with pytest.raises(sts.exceptions.ClientError, match="AccessDenied"):
        sts.assume_role_with_web_identity(RoleArn=role_arn, RoleSessionName="other", WebIdentityToken=tokens["other"])
    wrong_aud = core.create_namespaced_service_account_token("hyperpod-checkpointing", "default", {"spec": {}})
    with pytest.raises(sts.exceptions.ClientError, match="InvalidIdentityToken"):
        sts.assume_role_with_web_identity(RoleArn=role_arn, RoleSessionName="other",
                                          WebIdentityToken=wrong_aud.status.token)
    for pod in ("ckpt", "other"):
        core.delete_namespaced_pod(pod, "default", grace_period_seconds=0)

    # The same request again is a no-op for both features: no AWS or Kubernetes write at all.
    httpx.delete(twin.endpoint_url + "/_twin/writes").raise_for_status()
    with cp.client() as client:
        again = update(client, body)
        assert again["status"] == "SUCCEEDED", again
        assert {k: r["action"] for k, r in by_key(again).items()} == {
            "tieredStorage": "unchanged", "trainingOperator": "unchanged"}
        assert httpx.get(twin.endpoint_url + "/_twin/writes").json()["writes"] == {}

        # Drift: the annotation and the role are deleted by hand; the status names the broken links and
        # re-enabling repairs exactly those.
        core.patch_namespaced_service_account("hyperpod-checkpointing", "default",
                                              {"metadata": {"annotations": {"eks.amazonaws.com/role-arn": None}}})
        links = {x["link"]: x for x in features(client)["tieredStorage"]["actual"]["chain"]}
        assert [k for k, x in links.items() if not x["ok"]] == ["annotation"], links
        assert "missing" in links["annotation"]["why"]
        for name in iam.list_role_policies(RoleName=ROLE)["PolicyNames"]:
            iam.delete_role_policy(RoleName=ROLE, PolicyName=name)
        iam.delete_role(RoleName=ROLE)
        state = features(client)["tieredStorage"]
        broken = [x["link"] for x in state["actual"]["chain"] if not x["ok"]]
        assert state["state"] == "BROKEN" and broken == ["role", "trust", "policy", "annotation"], state
        repaired = update(client, {"tieredStorage": {"enabled": True}})
        assert by_key(repaired)["tieredStorage"]["action"] == "updated", repaired
        assert sorted(by_key(repaired)["tieredStorage"]["actual"]["repaired"]) == ["annotation", "policy", "role"]
        assert features(client)["tieredStorage"]["state"] == "ENABLED"

        # Off: no role, policy or annotation left; Mode Disable; the training operator untouched.
        off = update(client, {"tieredStorage": {"enabled": False}})
        assert off["status"] == "SUCCEEDED", off
        assert by_key(off)["tieredStorage"]["action"] == "disabled"
        after = features(client)
        assert after["tieredStorage"]["state"] == "DISABLED" and after["trainingOperator"]["enabled"]
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.get_role(RoleName=ROLE)
    with pytest.raises(k8s.exceptions.ApiException):
        core.read_namespaced_service_account("hyperpod-checkpointing", "default")
    assert sm.describe_cluster(ClusterName=f"hp-cluster-{TAG}")["TieredStorageConfig"]["Mode"] == "Disable"
    groups = sm.describe_cluster(ClusterName=f"hp-cluster-{TAG}")["InstanceGroups"]
    assert [g["InstanceGroupName"] for g in groups] == [g["InstanceGroupName"] for g in cluster["InstanceGroups"]]
    assert [g["TargetCount"] for g in groups] == [g["TargetCount"] for g in cluster["InstanceGroups"]]


def test_failed_feature_blocks_its_dependents_and_independent_ones_still_apply(
    shared: tuple[Running, TwinProcess],
) -> None:
    cp, twin = shared
    eks: Any = twin_client(twin, "eks")
    fault = {"kind": "error", "service": "iam", "operation": "CreateRole", "code": "AccessDenied",
             "message": "not authorized to perform iam:CreateRole", "status": 403}
    httpx.post(twin.endpoint_url + "/_twin/faults", json=fault).raise_for_status()
    with cp.client() as client:
        body = {"fsxCsiDriver": {"enabled": True}, "inferenceOperator": {"enabled": True},
                "kuberayOperator": {"enabled": True}}
        failed = update(client, body)
        assert failed["status"] == "FAILED", failed
        results = by_key(failed)
        assert results["fsxCsiDriver"]["status"] == "FAILED" and "CreateRole" in results["fsxCsiDriver"]["message"]
        # The dependent feature is not attempted: BLOCKED, naming the failed feature and its fix.
        blocked = results["inferenceOperator"]
        assert blocked["status"] == "BLOCKED" and blocked["actual"]["blockedBy"] == ["fsxCsiDriver"], blocked
        assert "fsxCsiDriver" in blocked["message"] and blocked["hint"].startswith("Fix fsxCsiDriver first")
        # The independent one is applied in the same operation.
        assert results["kuberayOperator"]["status"] == "SUCCEEDED", results
        stages = {s["name"]: s["status"] for s in failed["stages"] if s["name"] in body}
        assert stages == {"fsxCsiDriver": "FAILED", "inferenceOperator": "FAILED", "kuberayOperator": "SUCCEEDED"}
        assert failed["error"]["details"]["failedStages"] == ["fsxCsiDriver", "inferenceOperator"]
        addons = eks.list_addons(clusterName=f"eks-cluster-{TAG}")["addons"]
        assert "amazon-sagemaker-hyperpod-inference" not in addons
        assert features(client)["inferenceOperator"]["lastResult"]["status"] == "BLOCKED"
        httpx.delete(twin.endpoint_url + "/_twin/faults").raise_for_status()
        retried = client.post(f"/api/v1/operations/{failed['operationId']}/retry")
        assert retried.status_code == 202, retried.text
        done = wait_terminal(client, retried.json()["operationId"], timeout=240)
        assert done["status"] == "SUCCEEDED", done
        ray = next(s for s in done["stages"] if s["name"] == "kuberayOperator")
        assert ray["attempts"] == 1, "a feature that succeeded is not rerun by operation_retry"
        assert {k: r["status"] for k, r in by_key(done).items()} == dict.fromkeys(body, "SUCCEEDED")
    iam: Any = twin_client(twin, "iam")
    fsx = iam.get_role_policy(RoleName=f"instantstart-{TAG}-fsx-csi", PolicyName="instantstart")["PolicyDocument"]
    assert fsx == fsx_csi_policy()


def test_stale_cert_manager_value_and_refused_disable(shared: tuple[Running, TwinProcess]) -> None:
    cp, twin = shared
    eks: Any = twin_client(twin, "eks")
    with cp.client() as client:
        on = update(client, {"inferenceOperator": {"enabled": True}})
        assert on["status"] == "SUCCEEDED", on
        addon = eks.describe_addon(clusterName=f"eks-cluster-{TAG}", addonName="amazon-sagemaker-hyperpod-inference")
        config = json.loads(addon["addon"]["configurationValues"])
        assert config["executionRoleArn"].endswith(f"instantstart-{TAG}-inference")
        assert config["tlsCertificateS3Bucket"].endswith("/hyperpod-inference/tls")
        sm: Any = twin_client(twin, "sagemaker")
        assert config["hyperpodClusterArn"] == sm.describe_cluster(ClusterName=f"hp-cluster-{TAG}")["ClusterArn"]
        ray = update(client, {"kuberayOperator": {"enabled": True}})
        assert ray["status"] == "SUCCEEDED", ray
        # A form that still carries a stale certManager value: refused, naming who needs it; nothing changes.
        stale = client.post("/api/v1/capacity/advanced-features",
                            json={"kuberayOperator": {"enabled": True}, "certManager": {"enabled": False}})
        assert stale.status_code == 409, stale.text
        error = stale.json()["error"]
        assert error["code"] == "CONFLICT" and "inferenceOperator" in error["message"], error
        assert error["details"]["neededBy"] == ["trainingOperator", "inferenceOperator"]
        assert "cert-manager" in eks.list_addons(clusterName=f"eks-cluster-{TAG}")["addons"]
        # A stale `enabled: true` is a no-op that keeps cert-manager, now also claimed by the user.
        kept = update(client, {"certManager": {"enabled": True}})
        assert by_key(kept)["certManager"]["action"] == "unchanged", kept
        state = features(client)
        assert state["certManager"]["owners"]["cert-manager"] == ["trainingOperator", "inferenceOperator",
                                                                 "certManager"]
        # Turning the training operator off keeps cert-manager (inference still needs it).
        off = update(client, {"trainingOperator": {"enabled": False}})
        assert off["status"] == "SUCCEEDED", off
        assert "cert-manager" in by_key(off)["trainingOperator"]["actual"]["keptForOthers"]
    addons = eks.list_addons(clusterName=f"eks-cluster-{TAG}")["addons"]
    assert "cert-manager" in addons and TRAINING not in addons
    associations = eks.list_pod_identity_associations(clusterName=f"eks-cluster-{TAG}",
                                                      namespace="aws-hyperpod")["associations"]
    assert associations == []


def test_fault_in_one_feature_fails_it_with_code_and_retry_completes(shared: tuple[Running, TwinProcess]) -> None:
    cp, twin = shared
    iam: Any = twin_client(twin, "iam")
    with cp.client() as client:
        assert update(client, {"tieredStorage": {"enabled": True}})["status"] == "SUCCEEDED"
        # Someone loosened the trust by hand, and the control plane may not write trust policies right now.
        trust = iam.get_role(RoleName=ROLE)["Role"]["AssumeRolePolicyDocument"]
        condition = trust["Statement"][0]["Condition"]["StringEquals"]
        sub = next(k for k in condition if k.endswith(":sub"))
        condition[sub] = "system:serviceaccount:default:*"
        iam.update_assume_role_policy(RoleName=ROLE, PolicyDocument=json.dumps(trust))
        fault = {"kind": "error", "service": "iam", "operation": "UpdateAssumeRolePolicy", "code": "AccessDenied",
                 "message": "not authorized to perform iam:UpdateAssumeRolePolicy", "status": 403}
        httpx.post(twin.endpoint_url + "/_twin/faults", json=fault).raise_for_status()
        body = {"certManager": {"enabled": True}, "tieredStorage": {"enabled": True, "configMode": "custom",
                                                                      "percentage": 40},
                "observability": {"enabled": True}}
        failed = update(client, body)
        assert failed["status"] == "FAILED", failed
        feature = failed["error"]["details"]["feature"]
        assert feature["key"] == "tieredStorage" and feature["status"] == "FAILED"
        assert feature["code"] == "DEPENDENCY_FAILED" and "trust policy" in feature["message"]
        assert "UpdateAssumeRolePolicy" in feature["hint"]
        stages = {s["name"]: s["status"] for s in failed["stages"]}
        # observability does not need tieredStorage: applied in the same operation.
        assert stages["certManager"] == "SUCCEEDED" and stages["observability"] == "SUCCEEDED", stages
        assert failed["error"]["details"]["failedStages"] == ["tieredStorage"]
        assert by_key(failed)["observability"]["status"] == "SUCCEEDED"
        state = features(client)
        assert state["tieredStorage"]["lastResult"]["status"] == "FAILED"
        assert [x["link"] for x in state["tieredStorage"]["actual"]["chain"] if not x["ok"]] == ["trust"]
        assert state["certManager"]["lastResult"]["action"] == "unchanged"
        httpx.delete(twin.endpoint_url + "/_twin/faults").raise_for_status()
        retried = client.post(f"/api/v1/operations/{failed['operationId']}/retry")
        assert retried.status_code == 202, retried.text
        done = wait_terminal(client, retried.json()["operationId"], timeout=240)
        assert done["status"] == "SUCCEEDED", done
        results = by_key(done)
        assert results["tieredStorage"]["actual"]["repaired"] == ["trust", "clusterConfig"]
        final = features(client)
        assert final["tieredStorage"]["state"] == "ENABLED"
        config = final["tieredStorage"]["actual"]["config"]
        assert config == {"Mode": "Enable", "InstanceMemoryAllocationPercentage": 40}
        workspace = final["observability"]["actual"]["workspace"]
        assert workspace["remoteWriteUrl"].endswith("/api/v1/remote_write") and workspace["queryUrl"]
        policy = iam.get_role_policy(RoleName=f"instantstart-{TAG}-observability", PolicyName="instantstart")
        assert policy["PolicyDocument"]["Statement"][0]["Resource"] == [workspace["workspaceArn"]]
        assert final["observability"]["enabled"], final["observability"]


def test_checkpointing_subject_is_a_validated_parameter_shown_back(shared: tuple[Running, TwinProcess],
                                                                   tmp_path: Path) -> None:
    cp, twin = shared
    iam: Any = twin_client(twin, "iam")
    core = kube(twin, tmp_path, TAG)
    with cp.client() as client:
        bad = client.post("/api/v1/capacity/advanced-features",
                          json={"tieredStorage": {"enabled": True, "namespace": "Team_A"}})
        assert bad.status_code == 422 and "namespace" in bad.text, bad.text
        subject = {"namespace": "ckpt-team", "serviceAccount": "trainer"}
        body = {"tieredStorage": {"enabled": True, **subject}}
        missing = update(client, body)
        result = by_key(missing)["tieredStorage"]
        assert missing["status"] == "FAILED" and result["code"] == "PRECONDITION_FAILED", missing
        assert "ckpt-team does not exist" in result["message"] and "kubectl create namespace" in result["hint"]
        core.create_namespace({"metadata": {"name": "ckpt-team"}})
        retried = client.post(f"/api/v1/operations/{missing['operationId']}/retry")
        done = wait_terminal(client, retried.json()["operationId"], timeout=240)
        assert done["status"] == "SUCCEEDED", done
        state = features(client)["tieredStorage"]
        assert state["state"] == "ENABLED", state
        assert {k: state["actual"][k] for k in subject} == subject
    [statement] = iam.get_role(RoleName=ROLE)["Role"]["AssumeRolePolicyDocument"]["Statement"]
    assert "system:serviceaccount:ckpt-team:trainer" in statement["Condition"]["StringEquals"].values()
    sa = core.read_namespaced_service_account("trainer", "ckpt-team")
    assert sa.metadata.annotations["eks.amazonaws.com/role-arn"] == iam.get_role(RoleName=ROLE)["Role"]["Arn"]
    # The previous (default) service account no longer carries the role.
    with pytest.raises(k8s.exceptions.ApiException):
        core.read_namespaced_service_account("hyperpod-checkpointing", "default")


def test_observability_configuration_values_match_the_addon_schema(shared: tuple[Running, TwinProcess]) -> None:
    cp, twin = shared
    eks: Any = twin_client(twin, "eks")
    # Enabled already with these values: a no-op (workspace, role, policy, association, add-on values).
    httpx.delete(twin.endpoint_url + "/_twin/writes").raise_for_status()
    with cp.client() as client:
        again = update(client, {"observability": {"enabled": True}})
        assert by_key(again)["observability"]["action"] == "unchanged", again
    assert httpx.get(twin.endpoint_url + "/_twin/writes").json()["writes"] == {}
    cluster = f"eks-cluster-{TAG}"
    addon = eks.describe_addon(clusterName=cluster, addonName=OBSERVABILITY)["addon"]
    config = json.loads(addon["configurationValues"])
    workspace = twin_client(twin, "amp").list_workspaces(alias=f"instantstart-{TAG}")["workspaces"][0]
    assert config["ampWorkspace"]["arn"] == workspace["arn"]
    assert config["ampWorkspace"]["prometheusEndpoint"].startswith("https://")
    assert config["logging"] == {"enabled": False}
    assert config["metricsProvider"]["nodeMetrics"] == {"level": "BASIC", "scrapeInterval": 30}
    schema = json.loads(eks.describe_addon_configuration(addonName=OBSERVABILITY, addonVersion=addon["addonVersion"])[
        "configurationSchema"])
    assert set(config) <= set(schema["properties"]) and schema["additionalProperties"] is False
    # The twin, like EKS, refuses values outside the schema.
    with pytest.raises(eks.exceptions.InvalidParameterException, match="ampWorkspace"):
        eks.update_addon(clusterName=cluster, addonName=OBSERVABILITY,
                         configurationValues=json.dumps({"ampWorkspace": {"workspaceArn": "x"}}))


def test_karpenter_combines_with_other_keys_in_one_diff(shared: tuple[Running, TwinProcess]) -> None:
    cp, twin = shared
    sm: Any = twin_client(twin, "sagemaker")
    with cp.client() as client:
        # Validated against the cluster before anything is submitted: no group at count 0 yet.
        refused = client.post("/api/v1/capacity/advanced-features",
                              json={"karpenter": {"enabled": True}, "kuberayOperator": {"enabled": False}})
        assert refused.status_code == 412 and "No instance group" in refused.text, refused.text
        assert add_group(client, instanceGroupName="auto-af", instanceType="ml.g6.12xlarge", instanceCount=0,
                         availabilityZone="us-west-2c")["status"] == "SUCCEEDED"
        on = update(client, {"karpenter": {"enabled": True, "consolidationPolicy": "WhenEmpty"},
                             "certManager": {"enabled": True}}, timeout=300)
        assert on["status"] == "SUCCEEDED", on
        assert [s["name"] for s in on["stages"]][-1] == "karpenter"
        results = by_key(on)
        assert results["karpenter"]["action"] == "enabled" and results["certManager"]["action"] == "unchanged"
        karpenter = features(client)["karpenter"]
        assert karpenter["state"] == "ENABLED" and karpenter["settings"]["instanceGroups"] == ["auto-af"], karpenter
        assert karpenter["nodePool"]["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
        off = update(client, {"karpenter": {"enabled": False}, "kuberayOperator": {"enabled": False},
                              "observability": {"enabled": False}}, timeout=300)
        assert off["status"] == "SUCCEEDED", off
        assert {k: r["action"] for k, r in by_key(off).items()} == {
            "karpenter": "disabled", "kuberayOperator": "disabled", "observability": "disabled"}
        assert "observability.workspace" in by_key(off)["observability"]["actual"]["removed"]
        state = features(client)
        assert state["karpenter"]["state"] == "DISABLED" and state["observability"]["state"] == "DISABLED"
    assert sm.describe_cluster(ClusterName=f"hp-cluster-{TAG}")["AutoScaling"]["Mode"] == "Disable"
    assert not twin_client(twin, "amp").list_workspaces(alias=f"instantstart-{TAG}")["workspaces"]


def test_observability_logging_is_sent_as_the_collector_role(shared: tuple[Running, TwinProcess],
                                                             tmp_path: Path) -> None:
    """With logging on, the restarted collector writes its CloudWatch Logs stream as the observability role (the
    twin decides and records it: tests/iam/test_role_policies.py counts it as that role's use)."""
    cp, twin = shared
    with cp.client() as client:
        done = update(client, {"observability": {"enabled": True, "logging": True}})
        assert done["status"] == "SUCCEEDED", done
    eks: Any = twin_client(twin, "eks")
    addon = eks.describe_addon(clusterName=f"eks-cluster-{TAG}", addonName=OBSERVABILITY)["addon"]
    assert json.loads(addon["configurationValues"])["logging"] == {"enabled": True}
    core = kube(twin, tmp_path, TAG)
    namespace = "hyperpod-observability"
    before = {p.metadata.uid for p in core.list_namespaced_pod(namespace).items}
    assert before, "the observability add-on runs no pod"
    for pod in core.list_namespaced_pod(namespace).items:  # the collector reads its configuration at start
        core.delete_namespaced_pod(pod.metadata.name, namespace)
    role = f"instantstart-{TAG}-observability"
    log = role_log(Path(os.environ["HYPERPOD_TWIN_CALL_LOG"]))

    def sent() -> bool:
        return any(u.role == role and u.action == "logs:PutLogEvents" and u.decision == "Allow"
                   for u in recorded_uses(log))

    until(sent, "the restarted collector's PutLogEvents as the observability role", timeout=120)
