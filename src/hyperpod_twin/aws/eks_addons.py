"""EKS add-ons: the versions catalog HyperPod clusters use, and add-ons going CREATING→ACTIVE on the clock."""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from .context import AwsContext, hex_id
from .eks_access import create_association
from .eks_clusters import DEFAULT_K8S_VERSION, EKS, K8S_VERSIONS, EksState, invalid_param, not_found
from .protocol import AwsError, AwsRequest, RawResponse, json_response, page

ADDON_CREATE = 60.0  # twin seconds
ADDON_UPDATE = 45.0
ADDON_DELETE = 30.0

# name -> (type, publisher, owner, [versions newest first], default namespace). Versions satisfy the
# minimums the HyperPod inference operator documents (FACTS §4.2).
CATALOG: dict[str, tuple[str, str, str, list[str], str]] = {
    "vpc-cni": ("networking", "eks", "aws", ["v1.20.4-eksbuild.2", "v1.19.6-eksbuild.7"], "kube-system"),
    "coredns": ("networking", "eks", "aws", ["v1.12.3-eksbuild.1", "v1.11.4-eksbuild.14"], "kube-system"),
    "kube-proxy": ("networking", "eks", "aws", ["v1.33.3-eksbuild.4", "v1.32.6-eksbuild.8"], "kube-system"),
    "eks-pod-identity-agent": ("security", "eks", "aws", ["v1.3.8-eksbuild.2", "v1.3.7-eksbuild.2"], "kube-system"),
    "aws-ebs-csi-driver": ("storage", "eks", "aws", ["v1.48.0-eksbuild.2", "v1.46.0-eksbuild.1"], "kube-system"),
    "aws-mountpoint-s3-csi-driver": (
        "storage",
        "s3",
        "aws",
        ["v2.0.0-eksbuild.1", "v1.15.0-eksbuild.1", "v1.14.1-eksbuild.1"],
        "kube-system",
    ),
    "aws-fsx-csi-driver": ("storage", "eks", "aws", ["v1.7.0-eksbuild.1", "v1.6.0-eksbuild.1"], "kube-system"),
    "metrics-server": (
        "observability",
        "eks",
        "aws",
        ["v0.8.0-eksbuild.2", "v0.7.2-eksbuild.4"],
        "kube-system",
    ),
    "cert-manager": ("security", "eks", "aws", ["v1.18.2-eksbuild.2", "v1.17.2-eksbuild.1"], "cert-manager"),
    "amazon-cloudwatch-observability": (
        "observability",
        "eks",
        "aws",
        ["v4.4.0-eksbuild.1"],
        "amazon-cloudwatch",
    ),
    "amazon-sagemaker-hyperpod-training-operator": (
        "machine-learning",
        "sagemaker",
        "aws",
        ["v1.2.0-eksbuild.1", "v1.1.0-eksbuild.1", "v1.0.1-eksbuild.1"],
        "aws-hyperpod",
    ),
    "amazon-sagemaker-hyperpod-inference": (
        "machine-learning",
        "sagemaker",
        "aws",
        ["v1.1.0-eksbuild.1", "v1.0.0-eksbuild.1"],
        "hyperpod-inference-system",
    ),
    "amazon-sagemaker-hyperpod-observability": (
        "observability",
        "sagemaker",
        "aws",
        ["v1.1.0-eksbuild.1", "v1.0.0-eksbuild.1"],
        "hyperpod-observability",
    ),
    "amazon-sagemaker-hyperpod-taskgovernance": (
        "machine-learning",
        "sagemaker",
        "aws",
        ["v1.2.0-eksbuild.1", "v1.1.0-eksbuild.1"],
        "kueue-system",
    ),
}


def addon_info(name: str, k8s: str | None) -> dict[str, Any]:
    """DescribeAddonVersions entry for one add-on."""
    kind, publisher, owner, versions, namespace = CATALOG[name]
    clusters = [k8s] if k8s else list(K8S_VERSIONS)
    out_versions = []
    for i, version in enumerate(versions):
        out_versions.append(
            {
                "addonVersion": version,
                "architecture": ["amd64", "arm64"],
                "computeTypes": ["ec2", "hyperpod"],
                "compatibilities": [
                    {"clusterVersion": c, "platformVersions": ["*"], "defaultVersion": i == 0} for c in clusters
                ],
                "requiresConfiguration": False,
                "requiresIamPermissions": name.startswith("amazon-sagemaker-hyperpod") or "csi" in name,
            }
        )
    return {
        "addonName": name,
        "type": kind,
        "addonVersions": out_versions,
        "publisher": publisher,
        "owner": owner,
        "defaultNamespace": namespace,
    }


def _parse_config(value: Any) -> None:
    if value in (None, ""):
        return
    try:
        json.loads(value)
    except (TypeError, ValueError):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise invalid_param(f"configurationValues is not valid JSON or YAML: {exc}") from exc
        if not isinstance(parsed, dict):
            raise invalid_param("configurationValues must be a JSON or YAML object") from None


def register(ctx: AwsContext, state: EksState) -> None:
    """Answer the add-on APIs."""

    def publish(region: str, cluster: Any, addon: dict[str, Any], topic: str = "eks.addon.changed") -> None:
        ctx.emit(
            topic,
            cluster_name=cluster.name,
            cluster_arn=cluster.arn,
            arn=cluster.arn,
            addon_name=addon["addonName"],
            addon_version=addon["addonVersion"],
            status=addon["status"],
            configuration_values=addon.get("configurationValues"),
            namespace=(addon.get("namespaceConfig") or {}).get("namespace") or CATALOG[addon["addonName"]][4],
        )

    def find(region: str, cluster: Any, name: Any) -> dict[str, Any]:
        addon = state.cluster_extras(region, cluster.name).addons.get(str(name))
        if addon is None:
            raise not_found(
                f"No addon: {name} found in cluster: {cluster.name}", clusterName=cluster.name, addonName=name
            )
        return addon

    def check_version(name: str, version: Any) -> str:
        versions = CATALOG[name][3]
        if version in (None, "", "latest"):
            return versions[0]
        if version not in versions:
            raise invalid_param(f"Addon version specified is not supported: {version}", addonName=name)
        return str(version)

    @ctx.route(EKS, "DescribeAddonVersions")
    def versions(req: AwsRequest) -> RawResponse:
        p = req.params
        names = [str(p["addonName"])] if p.get("addonName") else sorted(CATALOG)
        if p.get("addonName") and p["addonName"] not in CATALOG:
            return json_response(req, {"addons": []})
        infos = [addon_info(n, p.get("kubernetesVersion")) for n in names]
        for key, field in (("types", "type"), ("publishers", "publisher"), ("owners", "owner")):
            if p.get(key):
                infos = [i for i in infos if i[field] in p[key]]
        return json_response(req, page(p, infos, "addons", camel=True))

    @ctx.route(EKS, "DescribeClusterVersions")
    def cluster_versions(req: AwsRequest) -> RawResponse:
        p = req.params
        wanted = set(p.get("clusterVersions") or [])
        items = []
        for i, version in enumerate(reversed(K8S_VERSIONS)):
            if wanted and version not in wanted:
                continue
            status = "STANDARD_SUPPORT" if i < 4 else "EXTENDED_SUPPORT"
            items.append(
                {
                    "clusterVersion": version,
                    "clusterType": "eks",
                    "defaultPlatformVersion": "eks.1",
                    "defaultVersion": version == DEFAULT_K8S_VERSION,
                    "status": status,
                    "versionStatus": status,
                    "kubernetesPatchVersion": f"{version}.0",
                }
            )
        if p.get("defaultOnly"):
            items = [i for i in items if i["defaultVersion"]]
        return json_response(req, {"clusterVersions": items})

    @ctx.route(EKS, "DescribeAddonConfiguration")
    def configuration(req: AwsRequest) -> RawResponse:
        name = str(req.params.get("addonName"))
        if name not in CATALOG:
            raise not_found(f"Addon {name} not found")
        version = check_version(name, req.params.get("addonVersion"))
        schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": True}
        return json_response(
            req,
            {
                "addonName": name,
                "addonVersion": version,
                "configurationSchema": json.dumps(schema),
                "podIdentityConfiguration": [],
            },
        )

    @ctx.route(EKS, "CreateAddon")
    def create(req: AwsRequest) -> RawResponse:
        p = req.params
        name = str(p.get("addonName") or "")
        with ctx.locked():
            cluster = state.active(req.region, p.get("clusterName"))
            if name not in CATALOG:
                raise invalid_param(
                    f"Addon {name} specified is not supported in {cluster.version} cluster version",
                    clusterName=cluster.name,
                    addonName=name,
                )
            extra = state.cluster_extras(req.region, cluster.name)
            if name in extra.addons:
                raise AwsError(
                    "ResourceInUseException", "Addon already exists.", 409, clusterName=cluster.name, addonName=name
                )
            version = check_version(name, p.get("addonVersion"))
            _parse_config(p.get("configurationValues"))
            now = ctx.clock.wall()
            arn = ctx.arn("eks", req.region, f"addon/{cluster.name}/{name}/{hex_id(8)}-{hex_id(4)}")
            assoc_arns = []
            for item in p.get("podIdentityAssociations") or []:
                assoc = create_association(
                    ctx,
                    state,
                    req.region,
                    cluster,
                    {
                        "namespace": CATALOG[name][4],
                        "serviceAccount": item.get("serviceAccount"),
                        "roleArn": item.get("roleArn"),
                    },
                    owner=arn,
                )
                assoc_arns.append(assoc["associationArn"])
            addon: dict[str, Any] = {
                "addonName": name,
                "clusterName": cluster.name,
                "status": "CREATING",
                "addonVersion": version,
                "health": {"issues": []},
                "addonArn": arn,
                "createdAt": now,
                "modifiedAt": now,
                "tags": dict(p.get("tags") or {}),
                "podIdentityAssociations": assoc_arns,
                "publisher": CATALOG[name][1],
                "owner": CATALOG[name][2],
            }
            for key in ("serviceAccountRoleArn", "configurationValues", "namespaceConfig"):
                if p.get(key):
                    addon[key] = copy.deepcopy(p[key])
            extra.addons[name] = addon
            publish(req.region, cluster, addon)

            def active() -> None:
                current = state.extras.get((req.region, cluster.name)) is extra and extra.addons.get(name) is addon
                if current and addon["status"] == "CREATING":
                    addon["status"] = "ACTIVE"
                    addon["modifiedAt"] = ctx.clock.wall()
                    publish(req.region, cluster, addon)
                    publish(req.region, cluster, addon, "eks.addon.active")

            ctx.later(ADDON_CREATE, active)
            return json_response(req, {"addon": copy.deepcopy(addon)})

    @ctx.route(EKS, "DescribeAddon")
    def describe(req: AwsRequest) -> RawResponse:
        with ctx.locked():
            cluster = state.cluster(req.region, req.params.get("clusterName"))
            return json_response(req, {"addon": copy.deepcopy(find(req.region, cluster, req.params.get("addonName")))})

    @ctx.route(EKS, "ListAddons")
    def list_addons(req: AwsRequest) -> RawResponse:
        with ctx.locked():
            cluster = state.cluster(req.region, req.params.get("clusterName"))
            return json_response(req, {"addons": sorted(state.cluster_extras(req.region, cluster.name).addons)})

    @ctx.route(EKS, "UpdateAddon")
    def update(req: AwsRequest) -> RawResponse:
        p = req.params
        with ctx.locked():
            cluster = state.active(req.region, p.get("clusterName"))
            addon = find(req.region, cluster, p.get("addonName"))
            if addon["status"] not in ("ACTIVE", "DEGRADED", "UPDATE_FAILED", "CREATE_FAILED"):
                raise AwsError(
                    "ResourceInUseException",
                    f"Addon {addon['addonName']} is {addon['status']}",
                    409,
                    clusterName=cluster.name,
                )
            params: list[dict[str, str]] = []
            changes: dict[str, Any] = {}
            if p.get("addonVersion"):
                changes["addonVersion"] = check_version(addon["addonName"], p["addonVersion"])
                params.append({"type": "AddonVersion", "value": changes["addonVersion"]})
            if "configurationValues" in p:
                _parse_config(p["configurationValues"])
                changes["configurationValues"] = p["configurationValues"]
                params.append({"type": "ConfigurationValues", "value": str(p["configurationValues"])})
            if "serviceAccountRoleArn" in p:
                changes["serviceAccountRoleArn"] = p["serviceAccountRoleArn"]
                params.append({"type": "ServiceAccountRoleArn", "value": str(p["serviceAccountRoleArn"])})
            if p.get("resolveConflicts"):
                params.append({"type": "ResolveConflicts", "value": str(p["resolveConflicts"])})
            update_rec: dict[str, Any] = {
                "id": hex_id(8) + "-" + hex_id(4) + "-" + hex_id(4) + "-" + hex_id(4) + "-" + hex_id(12),
                "status": "InProgress",
                "type": "AddonUpdate",
                "params": params,
                "createdAt": ctx.clock.wall(),
                "errors": [],
                "addon": addon["addonName"],
            }
            extra = state.cluster_extras(req.region, cluster.name)
            extra.updates[update_rec["id"]] = update_rec
            addon["status"] = "UPDATING"
            publish(req.region, cluster, addon)

            def done() -> None:
                if extra.addons.get(addon["addonName"]) is addon:
                    addon.update(changes)
                    addon["status"] = "ACTIVE"
                    addon["modifiedAt"] = ctx.clock.wall()
                    update_rec["status"] = "Successful"
                    publish(req.region, cluster, addon)
                    publish(req.region, cluster, addon, "eks.addon.active")

            ctx.later(ADDON_UPDATE, done)
            shown = {k: v for k, v in update_rec.items() if k != "addon"}
        return json_response(req, {"update": shown})

    @ctx.route(EKS, "DeleteAddon")
    def delete(req: AwsRequest) -> RawResponse:
        p = req.params
        with ctx.locked():
            cluster = state.cluster(req.region, p.get("clusterName"))
            addon = find(req.region, cluster, p.get("addonName"))
            extra = state.cluster_extras(req.region, cluster.name)
            if addon["status"] != "DELETING":
                addon["status"] = "DELETING"
                preserve = bool(p.get("preserve"))
                publish(req.region, cluster, addon)

                def gone() -> None:
                    if extra.addons.get(addon["addonName"]) is addon:
                        del extra.addons[addon["addonName"]]
                        for assoc_arn in addon.get("podIdentityAssociations") or []:
                            for aid, assoc in list(extra.pod_identities.items()):
                                if assoc["associationArn"] == assoc_arn:
                                    del extra.pod_identities[aid]
                        ctx.emit(
                            "eks.addon.deleted",
                            cluster_name=cluster.name,
                            cluster_arn=cluster.arn,
                            addon_name=addon["addonName"],
                            preserve=preserve,
                        )

                ctx.later(ADDON_DELETE, gone)
            return json_response(req, {"addon": copy.deepcopy(addon)})
