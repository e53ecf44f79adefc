"""The EKS add-on APIs (CreateAddon, DescribeAddon, UpdateAddon, DeleteAddon, versions) and add-on health.

Health follows `eks_addons.health_issues`: re-evaluated when a create or update finishes, when another
add-on of the cluster changes, and when HyperPod nodes of the cluster come or go, so a DEGRADED add-on
turns ACTIVE by itself once its prerequisite is installed or a node joins (and back).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hyperpod_twin.events import Topic

from .context import AwsContext, hex_id
from .eks_addon_schemas import check_config, schema_of
from .eks_addons import CATALOG, addon_info, compatible, default_version, health_issues
from .eks_clusters import DEFAULT_K8S_VERSION, EKS, K8S_VERSIONS, EksState, invalid_param, not_found
from .eks_pod_identity import create_association
from .protocol import AwsError, AwsRequest, RawResponse, json_response, page

ADDON_CREATE = 60.0  # twin seconds
ADDON_UPDATE = 45.0
ADDON_DELETE = 30.0
SETTLED = ("ACTIVE", "DEGRADED")


class AddonApi:
    """One EKS account's add-ons: handlers, lifecycle timers and health."""

    def __init__(self, ctx: AwsContext, state: EksState) -> None:
        self.ctx = ctx
        self.state = state
        self.nodes: dict[str, set[str]] = {}  # EKS cluster ARN -> Running HyperPod instance ids
        self.sticky: set[tuple[str, str, str]] = set()  # (region, cluster, add-on) DEGRADED by a fault
        self.applied: dict[str, int] = {}  # instance id -> sequence of the last node event applied

    # -- events ------------------------------------------------------------------------------
    def publish(self, cluster: Any, addon: dict[str, Any], topic: Topic = "eks.addon.changed") -> None:
        """Tell the Kubernetes side about an add-on change."""
        self.ctx.emit(
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

    def on_node(self, eks_cluster_arn: str = "", node: dict[str, Any] | None = None, instance_id: str = "",
                sequence: int | None = None, **_: Any) -> None:
        """A HyperPod node changed or went: keep the Running set and re-evaluate the cluster's add-ons.

        An event older than the last one applied for the instance (delivered late by another thread) is dropped.
        """
        if not eks_cluster_arn:
            return
        with self.ctx.locked():
            key = str((node or {}).get("InstanceId") or instance_id)
            if sequence is not None:
                if sequence <= self.applied.get(key, 0):
                    return
                self.applied[key] = sequence
            running = self.nodes.setdefault(eks_cluster_arn, set())
            before = bool(running)
            if node is not None and (node.get("InstanceStatus") or {}).get("Status") == "Running":
                running.add(key)
            else:
                running.discard(key)
            if before != bool(running):
                region, name = eks_cluster_arn.split(":")[3], eks_cluster_arn.rsplit("/", 1)[-1]
                self.reevaluate(region, name)

    def reset(self) -> None:
        """Forget nodes and fault-made states."""
        self.nodes.clear()
        self.sticky.clear()
        self.applied.clear()

    # -- health ------------------------------------------------------------------------------
    def settle(self, region: str, cluster: Any, addon: dict[str, Any]) -> None:
        """Set a settled add-on's status and health from its prerequisites and the cluster's nodes."""
        if (region, cluster.name, addon["addonName"]) in self.sticky:
            return
        extra = self.state.cluster_extras(region, cluster.name)
        installed = {n: a["status"] for n, a in extra.addons.items() if n != addon["addonName"]}
        issues = health_issues(addon["addonName"], installed, bool(self.nodes.get(cluster.arn)))
        addon["status"] = "DEGRADED" if issues else "ACTIVE"
        addon["health"] = {"issues": issues}

    def reevaluate(self, region: str, name: str) -> None:
        """Re-check every settled add-on of a cluster; publish the ones whose status changed."""
        extra = self.state.extras.get((region, name))
        if extra is None:
            return
        try:
            cluster = self.state.cluster(region, name)
        except AwsError:
            return
        for addon in list(extra.addons.values()):
            if addon["status"] not in SETTLED:
                continue
            before = (addon["status"], json.dumps(addon["health"], sort_keys=True))
            self.settle(region, cluster, addon)
            if before != (addon["status"], json.dumps(addon["health"], sort_keys=True)):
                addon["modifiedAt"] = self.ctx.clock.wall()
                self.publish(cluster, addon)

    def _fault(self, name: str, outcomes: tuple[str, ...]) -> Any:
        for outcome in outcomes:
            fault = self.ctx.faults.lifecycle("addon_failure", addon=name, outcome=outcome)
            if fault is not None:
                return fault
        return None

    def _fail(self, region: str, cluster: Any, addon: dict[str, Any], fault: Any) -> None:
        default_code = "InsufficientNumberOfReplicas" if fault.outcome == "DEGRADED" else "ConfigurationConflict"
        code = fault.code or default_code
        message = fault.message or {
            "CREATE_FAILED": "Conflicts found when trying to apply. Will not continue due to resolve conflicts mode.",
            "UPDATE_FAILED": "Conflicts found when trying to apply. Will not continue due to resolve conflicts mode.",
            "DEGRADED": "The add-on is unhealthy because it doesn't have the desired number of replicas.",
        }[fault.outcome]
        addon["status"] = fault.outcome
        addon["health"] = {"issues": [{"code": code, "message": message, "resourceIds": [addon["addonName"]]}]}
        if fault.outcome == "DEGRADED":
            self.sticky.add((region, cluster.name, addon["addonName"]))

    # -- lifecycle ---------------------------------------------------------------------------
    def finish_create(self, region: str, cluster: Any, addon: dict[str, Any]) -> None:
        """CREATING ends: scripted failure, or settled by health; its resources are installed unless it failed."""
        extra = self.state.extras.get((region, cluster.name))
        if extra is None or extra.addons.get(addon["addonName"]) is not addon or addon["status"] != "CREATING":
            return
        fault = self._fault(addon["addonName"], ("CREATE_FAILED", "DEGRADED"))
        if fault is not None:
            self._fail(region, cluster, addon, fault)
        else:
            self.settle(region, cluster, addon)
        addon["modifiedAt"] = self.ctx.clock.wall()
        self.publish(cluster, addon)
        if addon["status"] in SETTLED:
            self.publish(cluster, addon, "eks.addon.active")
            self.reevaluate(region, cluster.name)

    def finish_update(self, region: str, cluster: Any, addon: dict[str, Any], changes: dict[str, Any],
                      record: dict[str, Any]) -> None:
        """UPDATING ends: UPDATE_FAILED by a scripted fault (changes not applied), else settled."""
        extra = self.state.extras.get((region, cluster.name))
        if extra is None or extra.addons.get(addon["addonName"]) is not addon:
            return
        fault = self._fault(addon["addonName"], ("UPDATE_FAILED", "DEGRADED"))
        if fault is not None and fault.outcome == "UPDATE_FAILED":
            self._fail(region, cluster, addon, fault)
            record["status"] = "Failed"
            record["errors"] = [{"errorCode": "ConfigurationConflict", "errorMessage": addon["health"]["issues"][0]
                                 ["message"], "resourceIds": [addon["addonName"]]}]
        else:
            addon.update(changes)
            self.sticky.discard((region, cluster.name, addon["addonName"]))
            if fault is not None:
                self._fail(region, cluster, addon, fault)
            else:
                self.settle(region, cluster, addon)
            record["status"] = "Successful"
        addon["modifiedAt"] = self.ctx.clock.wall()
        self.publish(cluster, addon)
        if addon["status"] in SETTLED:
            self.publish(cluster, addon, "eks.addon.active")

    def finish_delete(self, region: str, cluster: Any, addon: dict[str, Any], preserve: bool) -> None:
        """DELETING ends: the add-on and its pod identity associations go; the others re-evaluate."""
        extra = self.state.extras.get((region, cluster.name))
        if extra is None or extra.addons.get(addon["addonName"]) is not addon:
            return
        del extra.addons[addon["addonName"]]
        self.sticky.discard((region, cluster.name, addon["addonName"]))
        for assoc_arn in addon.get("podIdentityAssociations") or []:
            for aid, assoc in list(extra.pod_identities.items()):
                if assoc["associationArn"] == assoc_arn:
                    del extra.pod_identities[aid]
        self.ctx.emit("eks.addon.deleted", cluster_name=cluster.name, cluster_arn=cluster.arn,
                      addon_name=addon["addonName"], preserve=preserve)
        self.reevaluate(region, cluster.name)

    # -- helpers -----------------------------------------------------------------------------
    def find(self, region: str, cluster: Any, name: Any) -> dict[str, Any]:
        """The add-on record, or ResourceNotFoundException."""
        addon = self.state.cluster_extras(region, cluster.name).addons.get(str(name))
        if addon is None:
            raise not_found(
                f"No addon: {name} found in cluster: {cluster.name}", clusterName=cluster.name, addonName=name
            )
        return addon

    @staticmethod
    def check_version(name: str, version: Any, k8s: str | None = None) -> str:
        """The version to install (by default the newest that runs on the cluster's Kubernetes version `k8s`);
        InvalidParameterException for an unknown one or, as EKS refuses it, one that does not run on `k8s`."""
        versions = CATALOG[name][3]
        if version in (None, "", "latest"):
            chosen = default_version(name, k8s) if k8s else versions[0]
            if chosen is None:
                raise invalid_param(f"Addon {name} specified is not supported in {k8s} cluster version",
                                    addonName=name)
            return chosen
        if version not in versions or (k8s and not compatible(name, str(version), k8s)):
            raise invalid_param(f"Addon version specified is not supported: {version}", addonName=name)
        return str(version)

    # -- handlers ----------------------------------------------------------------------------
    def describe_versions(self, req: AwsRequest) -> RawResponse:
        """DescribeAddonVersions."""
        p = req.params
        names = [str(p["addonName"])] if p.get("addonName") else sorted(CATALOG)
        if p.get("addonName") and p["addonName"] not in CATALOG:
            return json_response(req, {"addons": []})
        infos = [addon_info(n, p.get("kubernetesVersion")) for n in names]
        for key, field in (("types", "type"), ("publishers", "publisher"), ("owners", "owner")):
            if p.get(key):
                infos = [i for i in infos if i[field] in p[key]]
        return json_response(req, page(p, infos, "addons", camel=True))

    def describe_cluster_versions(self, req: AwsRequest) -> RawResponse:
        """DescribeClusterVersions."""
        p = req.params
        wanted = set(p.get("clusterVersions") or [])
        items = []
        for i, version in enumerate(reversed(K8S_VERSIONS)):
            if wanted and version not in wanted:
                continue
            status = "STANDARD_SUPPORT" if i < 4 else "EXTENDED_SUPPORT"
            items.append({
                "clusterVersion": version, "clusterType": "eks", "defaultPlatformVersion": "eks.1",
                "defaultVersion": version == DEFAULT_K8S_VERSION, "status": status, "versionStatus": status,
                "kubernetesPatchVersion": f"{version}.0",
            })
        if p.get("defaultOnly"):
            items = [i for i in items if i["defaultVersion"]]
        return json_response(req, {"clusterVersions": items})

    def describe_configuration(self, req: AwsRequest) -> RawResponse:
        """DescribeAddonConfiguration."""
        name = str(req.params.get("addonName"))
        if name not in CATALOG:
            raise not_found(f"Addon {name} not found")
        version = self.check_version(name, req.params.get("addonVersion"))
        return json_response(req, {"addonName": name, "addonVersion": version,
                                   "configurationSchema": json.dumps(schema_of(name)), "podIdentityConfiguration": []})

    def create(self, req: AwsRequest) -> RawResponse:
        """CreateAddon: CREATING now, settled after ADDON_CREATE twin seconds."""
        p = req.params
        name = str(p.get("addonName") or "")
        with self.ctx.locked():
            cluster = self.state.active(req.region, p.get("clusterName"))
            if name not in CATALOG:
                raise invalid_param(f"Addon {name} specified is not supported in {cluster.version} cluster version",
                                    clusterName=cluster.name, addonName=name)
            extra = self.state.cluster_extras(req.region, cluster.name)
            if name in extra.addons:
                raise AwsError("ResourceInUseException", "Addon already exists.", 409, clusterName=cluster.name,
                               addonName=name)
            version = self.check_version(name, p.get("addonVersion"), str(cluster.version))
            check_config(name, p.get("configurationValues"))
            addon = self._new_addon(req, cluster, name, version)
            extra.addons[name] = addon
            self.publish(cluster, addon)
            region = req.region
            self.ctx.later(ADDON_CREATE, lambda: self.finish_create(region, cluster, addon))
            return json_response(req, {"addon": copy.deepcopy(addon)})

    def _new_addon(self, req: AwsRequest, cluster: Any, name: str, version: str) -> dict[str, Any]:
        p = req.params
        now = self.ctx.clock.wall()
        arn = self.ctx.arn("eks", req.region, f"addon/{cluster.name}/{name}/{hex_id(8)}-{hex_id(4)}")
        assoc_arns = []
        for item in p.get("podIdentityAssociations") or []:
            assoc = create_association(
                self.ctx, self.state, req.region, cluster,
                {"namespace": CATALOG[name][4], "serviceAccount": item.get("serviceAccount"),
                 "roleArn": item.get("roleArn")},
                owner=arn,
            )
            assoc_arns.append(assoc["associationArn"])
        addon: dict[str, Any] = {
            "addonName": name, "clusterName": cluster.name, "status": "CREATING", "addonVersion": version,
            "health": {"issues": []}, "addonArn": arn, "createdAt": now, "modifiedAt": now,
            "tags": dict(p.get("tags") or {}), "podIdentityAssociations": assoc_arns,
            "publisher": CATALOG[name][1], "owner": CATALOG[name][2],
        }
        for key in ("serviceAccountRoleArn", "configurationValues", "namespaceConfig"):
            if p.get(key):
                addon[key] = copy.deepcopy(p[key])
        return addon

    def describe(self, req: AwsRequest) -> RawResponse:
        """DescribeAddon."""
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, req.params.get("clusterName"))
            addon = self.find(req.region, cluster, req.params.get("addonName"))
            return json_response(req, {"addon": copy.deepcopy(addon)})

    def list_addons(self, req: AwsRequest) -> RawResponse:
        """ListAddons."""
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, req.params.get("clusterName"))
            names = sorted(self.state.cluster_extras(req.region, cluster.name).addons)
            return json_response(req, page(req.params, names, "addons", camel=True))

    def update(self, req: AwsRequest) -> RawResponse:
        """UpdateAddon: UPDATING now, the changes applied (or UPDATE_FAILED) after ADDON_UPDATE twin seconds."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.active(req.region, p.get("clusterName"))
            addon = self.find(req.region, cluster, p.get("addonName"))
            if addon["status"] not in ("ACTIVE", "DEGRADED", "UPDATE_FAILED", "CREATE_FAILED"):
                raise AwsError("ResourceInUseException", f"Addon {addon['addonName']} is {addon['status']}", 409,
                               clusterName=cluster.name)
            changes, params = self._changes(addon["addonName"], p, str(cluster.version))
            record: dict[str, Any] = {
                "id": "-".join((hex_id(8), hex_id(4), hex_id(4), hex_id(4), hex_id(12))),
                "status": "InProgress", "type": "AddonUpdate", "params": params,
                "createdAt": self.ctx.clock.wall(), "errors": [],
            }
            self.state.cluster_extras(req.region, cluster.name).updates[record["id"]] = {
                **record, "addon": addon["addonName"]}
            record = self.state.cluster_extras(req.region, cluster.name).updates[record["id"]]
            addon["status"] = "UPDATING"
            self.publish(cluster, addon)
            region = req.region
            self.ctx.later(ADDON_UPDATE, lambda: self.finish_update(region, cluster, addon, changes, record))
            shown = {k: v for k, v in record.items() if k != "addon"}
        return json_response(req, {"update": shown})

    def _changes(self, name: str, p: dict[str, Any], k8s: str) -> tuple[dict[str, Any], list[dict[str, str]]]:
        params: list[dict[str, str]] = []
        changes: dict[str, Any] = {}
        if p.get("addonVersion"):
            changes["addonVersion"] = self.check_version(name, p["addonVersion"], k8s)
            params.append({"type": "AddonVersion", "value": changes["addonVersion"]})
        if "configurationValues" in p:
            check_config(name, p["configurationValues"])
            changes["configurationValues"] = p["configurationValues"]
            params.append({"type": "ConfigurationValues", "value": str(p["configurationValues"])})
        if "serviceAccountRoleArn" in p:
            changes["serviceAccountRoleArn"] = p["serviceAccountRoleArn"]
            params.append({"type": "ServiceAccountRoleArn", "value": str(p["serviceAccountRoleArn"])})
        if p.get("resolveConflicts"):
            params.append({"type": "ResolveConflicts", "value": str(p["resolveConflicts"])})
        return changes, params

    def delete(self, req: AwsRequest) -> RawResponse:
        """DeleteAddon: DELETING now, gone after ADDON_DELETE twin seconds."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, p.get("clusterName"))
            addon = self.find(req.region, cluster, p.get("addonName"))
            if addon["status"] != "DELETING":
                addon["status"] = "DELETING"
                preserve = bool(p.get("preserve"))
                self.publish(cluster, addon)
                region = req.region
                self.ctx.later(ADDON_DELETE, lambda: self.finish_delete(region, cluster, addon, preserve))
            return json_response(req, {"addon": copy.deepcopy(addon)})


def register(ctx: AwsContext, state: EksState) -> AddonApi:
    """Route the add-on APIs to an AddonApi and feed it HyperPod node events."""
    api = AddonApi(ctx, state)
    for operation, handler in (
        ("DescribeAddonVersions", api.describe_versions),
        ("DescribeClusterVersions", api.describe_cluster_versions),
        ("DescribeAddonConfiguration", api.describe_configuration),
        ("CreateAddon", api.create),
        ("DescribeAddon", api.describe),
        ("ListAddons", api.list_addons),
        ("UpdateAddon", api.update),
        ("DeleteAddon", api.delete),
    ):
        ctx.route(EKS, operation)(handler)
    ctx.bus.subscribe("hyperpod.node.changed", api.on_node)
    ctx.bus.subscribe("hyperpod.node.removed", api.on_node)
    ctx.on_reset(api.reset)
    return api
