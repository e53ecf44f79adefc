"""HyperPod node operations, cluster events, software updates and tags for HyperPod ARNs."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from .context import AwsContext
from .hyperpod_model import IMAGE_RELEASES, LEAVING, Cluster, Node, node_details, node_summary, without_instance
from .hyperpod_rolling import deployment_problem
from .protocol import AwsError, AwsRequest, PassThrough, RawResponse, json_response, page, validation

if TYPE_CHECKING:
    from .sagemaker_hyperpod import HyperPod

SM = "sagemaker"
NODE_ID_RE = re.compile(r"^i-[a-f0-9]{8}(?:[a-f0-9]{9})?$")


def _node(cluster: Cluster, p: dict[str, Any], now: float) -> Node:
    node_id, logical = p.get("NodeId"), p.get("NodeLogicalId")
    if (node_id is None) == (logical is None):
        raise validation("Specify exactly one of NodeId or NodeLogicalId.")
    for node in cluster.nodes.values():
        if (node.instance_id == node_id and node.has_instance(now)) or (
                logical is not None and node.logical_id == logical):
            return node
    raise AwsError("ResourceNotFound", f"Node {node_id or logical} not found in cluster {cluster.name}.")


class NodeOps:
    """The HyperPod node, event, software-update and tag operations, one named handler each."""

    def __init__(self, ctx: AwsContext, hp: HyperPod) -> None:
        self.ctx = ctx
        self.hp = hp
        self.life = hp.life


    def list_nodes(self, req: AwsRequest) -> RawResponse:
        p = req.params
        with self.ctx.locked():
            cluster = self.hp.get(req.region, p.get("ClusterName"))
            nodes = list(cluster.nodes.values())
            if p.get("InstanceGroupNameContains"):
                nodes = [n for n in nodes if str(p["InstanceGroupNameContains"]) in n.group]
            if p.get("CreationTimeAfter") is not None:
                nodes = [n for n in nodes if n.launch_time > float(p["CreationTimeAfter"])]
            if p.get("CreationTimeBefore") is not None:
                nodes = [n for n in nodes if n.launch_time < float(p["CreationTimeBefore"])]
            if p.get("SortBy") == "NAME":
                nodes.sort(key=lambda n: n.instance_id)
            else:
                nodes.sort(key=lambda n: (n.launch_time, n.instance_id))
            if p.get("SortOrder") == "Descending":
                nodes.reverse()
            now = self.ctx.clock.wall()
            if p.get("IncludeNodeLogicalIds"):
                # Nodes still provisioning are listed too, by NodeLogicalId, without an InstanceId.
                items = [node_summary(cluster, n) if n.has_instance(now) else without_instance(node_summary(cluster, n))
                         for n in nodes]
            else:  # only nodes with an instance, and NodeLogicalId only when asked for
                items = [node_summary(cluster, n) for n in nodes if n.has_instance(now)]
                for item in items:
                    item.pop("NodeLogicalId", None)
        return json_response(req, page(p, items, "ClusterNodeSummaries"))

    def describe_node(self, req: AwsRequest) -> RawResponse:
        with self.ctx.locked():
            cluster = self.hp.get(req.region, req.params.get("ClusterName"))
            now = self.ctx.clock.wall()
            node = _node(cluster, req.params, now)
            details = node_details(cluster, node)
            return json_response(req, {"NodeDetails": details if node.has_instance(now) else without_instance(details)})

    def _ids(self, p: dict[str, Any], limit: int) -> list[str]:
        node_ids = [str(i) for i in p.get("NodeIds") or []]
        if not node_ids and not p.get("NodeLogicalIds"):
            raise validation("Specify NodeIds or NodeLogicalIds.")
        if len(node_ids) > limit:
            raise validation(f"At most {limit} NodeIds can be given.")
        return node_ids

    def _by_logical(self, cluster: Cluster, logical: list[str]) -> tuple[list[Node], list[str]]:
        found, missing = [], []
        for lid in logical:
            node = next((n for n in cluster.nodes.values() if n.logical_id == lid), None)
            if node is None:
                missing.append(lid)
            else:
                found.append(node)
        return found, missing

    def batch(self, req: AwsRequest, action: str) -> RawResponse:
        p = req.params
        node_ids = self._ids(p, 25)
        with self.ctx.locked():
            cluster = self.hp.get(req.region, p.get("ClusterName"))
            ok: list[str] = []
            failed: list[dict[str, str]] = []
            for nid in node_ids:
                node = cluster.nodes.get(nid)
                if node is None or not NODE_ID_RE.match(nid):
                    failed.append(
                        {"NodeId": nid, "ErrorCode": "InstanceIdNotFound", "Message": f"Node {nid} not found."}
                    )
                elif node.status != "Running":
                    failed.append(
                        {
                            "NodeId": nid,
                            "ErrorCode": "InvalidInstanceStatus",
                            "Message": f"Node {nid} is {node.status}; it must be Running.",
                        }
                    )
                else:
                    ok.append(nid)
            nodes, missing = self._by_logical(cluster, [str(x) for x in p.get("NodeLogicalIds") or []])
            for nid in ok:
                if action == "reboot":
                    self.life.reboot(cluster, cluster.nodes[nid])
                else:
                    self.life.replace(cluster, cluster.nodes[nid])
            for node in nodes:
                (self.life.reboot if action == "reboot" else self.life.replace)(cluster, node)
        out: dict[str, Any] = {"Successful": ok, "Failed": failed}
        if p.get("NodeLogicalIds"):
            out["SuccessfulNodeLogicalIds"] = [n.logical_id for n in nodes]
            out["FailedNodeLogicalIds"] = [
                {"NodeLogicalId": m, "ErrorCode": "InstanceIdNotFound", "Message": f"Node {m} not found."}
                for m in missing
            ]
        return json_response(req, out)


    def batch_delete(self, req: AwsRequest) -> RawResponse:
        p = req.params
        node_ids = self._ids(p, 3000)
        with self.ctx.locked():
            cluster = self.hp.get(req.region, p.get("ClusterName"))
            if cluster.status in ("Creating", "Deleting"):
                raise AwsError("ConflictException", f"Cluster {cluster.name} is {cluster.status}.")
            ok: list[str] = []
            failed: list[dict[str, str]] = []
            for nid in node_ids:
                node = cluster.nodes.get(nid)
                if node is None:
                    failed.append({"NodeId": nid, "Code": "NodeIdNotFound", "Message": f"Node {nid} not found."})
                elif node.status in LEAVING:
                    failed.append(
                        {"NodeId": nid, "Code": "InvalidNodeStatus", "Message": f"Node {nid} is {node.status}."}
                    )
                else:
                    ok.append(nid)
            nodes, missing = self._by_logical(cluster, [str(x) for x in p.get("NodeLogicalIds") or []])
            for node in [cluster.nodes[n] for n in ok] + nodes:
                group = cluster.groups.get(node.group)
                if group is not None:
                    # Deleting a node lowers the group's target so HyperPod does not launch a replacement.
                    group.target = max(group.target - 1, 0)
                self.life.remove_node(cluster, node, "Deleted by BatchDeleteClusterNodes")
            self.life.reconcile(cluster)
        out: dict[str, Any] = {"Successful": ok, "Failed": failed}
        if p.get("NodeLogicalIds"):
            out["SuccessfulNodeLogicalIds"] = [n.logical_id for n in nodes]
            out["FailedNodeLogicalIds"] = [
                {"NodeLogicalId": m, "Code": "NodeIdNotFound", "Message": f"Node {m} not found."} for m in missing
            ]
        return json_response(req, out)

    def batch_add(self, req: AwsRequest) -> RawResponse:
        p = req.params
        adds = p.get("NodesToAdd") or []
        if not 1 <= len(adds) <= 5:
            raise validation("NodesToAdd must contain 1 to 5 entries.")
        with self.ctx.locked():
            cluster = self.hp.get(req.region, p.get("ClusterName"))
            if not cluster.continuous:
                raise validation("BatchAddClusterNodes requires NodeProvisioningMode Continuous.")
            ok: list[dict[str, Any]] = []
            failed: list[dict[str, Any]] = []
            for item in adds:
                name = str(item.get("InstanceGroupName"))
                inc = int(item.get("IncrementTargetCountBy") or 0)
                group = cluster.groups.get(name)
                if group is None:
                    failed.append(
                        {
                            "InstanceGroupName": name,
                            "ErrorCode": "InstanceGroupNotFound",
                            "FailedCount": inc,
                            "Message": f"Instance group {name} not found.",
                        }
                    )
                    continue
                if group.status == "Deleting":
                    failed.append(
                        {
                            "InstanceGroupName": name,
                            "ErrorCode": "InvalidInstanceGroupStatus",
                            "FailedCount": inc,
                            "Message": f"Instance group {name} is being deleted.",
                        }
                    )
                    continue
                before = set(cluster.nodes)
                self.life.scale(cluster, group, group.target + inc)
                for nid in sorted(set(cluster.nodes) - before):
                    ok.append(
                        {"NodeLogicalId": cluster.nodes[nid].logical_id, "InstanceGroupName": name, "Status": "Pending"}
                    )
        return json_response(req, {"Successful": ok, "Failed": failed})

    def update_software(self, req: AwsRequest) -> RawResponse:
        p = req.params
        with self.ctx.locked():
            cluster = self.hp.get(req.region, p.get("ClusterName"))
            if cluster.status != "InService":
                raise AwsError(
                    "ConflictException", f"Cluster {cluster.name} is {cluster.status}; it must be InService."
                )
            asked = {str(g.get("InstanceGroupName")): g for g in p.get("InstanceGroups") or []}
            names = list(asked) or list(cluster.groups)
            for n in names:
                if n not in cluster.groups:
                    raise validation(f"Instance group {n} does not exist in cluster {cluster.name}.")
            targets = {n: str(g["ImageReleaseVersion"]) for n, g in asked.items() if g.get("ImageReleaseVersion")}
            for n, release in targets.items():
                if release not in IMAGE_RELEASES:
                    raise validation(f"ImageReleaseVersion {release} of instance group {n} is not a HyperPod "
                                     f"release; available: {', '.join(IMAGE_RELEASES)}.")
            deployment = p.get("DeploymentConfig")
            problem = deployment_problem(deployment) if deployment is not None else None
            if problem is not None:
                raise validation(problem)
            cluster.add_event(self.ctx.clock.wall(), "Cluster software update started")
            self.life.software_update(cluster, [cluster.groups[n] for n in names], targets, deployment)
        return json_response(req, {"ClusterArn": cluster.arn})

    def health_check(self, req: AwsRequest) -> RawResponse:
        p = req.params
        with self.ctx.locked():
            cluster = self.hp.get(req.region, p.get("ClusterName"))
            for conf in p.get("DeepHealthCheckConfigurations") or []:
                name = str(conf.get("InstanceGroupName"))
                if name not in cluster.groups:
                    raise validation(f"Instance group {name} does not exist in cluster {cluster.name}.")
                wanted = set(conf.get("InstanceIds") or [])
                for node in cluster.group_nodes(name):
                    if node.status == "Running" and (not wanted or node.instance_id in wanted):
                        self.life.deep_health_check(cluster, node)
        return json_response(req, {"ClusterArn": cluster.arn})

    def list_events(self, req: AwsRequest) -> RawResponse:
        p = req.params
        with self.ctx.locked():
            cluster = self.hp.get(req.region, p.get("ClusterName"))
            events = list(cluster.events)
        for key, field in (
            ("InstanceGroupName", "InstanceGroupName"),
            ("NodeId", "InstanceId"),
            ("ResourceType", "ResourceType"),
            ("OperationId", "OperationId"),
        ):
            if p.get(key):
                events = [e for e in events if e.get(field) == p[key]]
        if p.get("EventTimeAfter") is not None:
            events = [e for e in events if e["EventTime"] > float(p["EventTimeAfter"])]
        if p.get("EventTimeBefore") is not None:
            events = [e for e in events if e["EventTime"] < float(p["EventTimeBefore"])]
        events.sort(key=lambda e: e["EventTime"], reverse=p.get("SortOrder", "Descending") == "Descending")
        return json_response(req, page(p, events, "Events"))

    def describe_event(self, req: AwsRequest) -> RawResponse:
        with self.ctx.locked():
            cluster = self.hp.get(req.region, req.params.get("ClusterName"))
            event = next((e for e in cluster.events if e["EventId"] == req.params.get("EventId")), None)
        if event is None:
            raise AwsError("ResourceNotFound", f"Event {req.params.get('EventId')} not found.")
        return json_response(req, {"EventDetails": dict(event)})

    def _tagged(self, arn: str) -> Any:
        for cluster in self.life.clusters.values():
            if cluster.arn == arn:
                return cluster
        plan = self.hp.plans.plans.get(arn)
        if plan is None and re.match(r"^arn:aws[a-z\-]*:sagemaker:[^:]*:\d{12}:(cluster|training-plan)/", arn):
            # HyperPod clusters and training plans are the twin's; moto does not know them.
            raise AwsError("ResourceNotFound", f"Resource {arn} not found.")
        return plan

    def add_tags(self, req: AwsRequest) -> RawResponse:
        with self.ctx.locked():
            obj = self._tagged(str(req.params.get("ResourceArn")))
            if obj is None:
                raise PassThrough()
            new = {t["Key"]: t["Value"] for t in req.params.get("Tags") or []}
            obj.tags = [t for t in obj.tags if t["Key"] not in new] + [{"Key": k, "Value": v} for k, v in new.items()]
            return json_response(req, {"Tags": list(obj.tags)})

    def delete_tags(self, req: AwsRequest) -> RawResponse:
        with self.ctx.locked():
            obj = self._tagged(str(req.params.get("ResourceArn")))
            if obj is None:
                raise PassThrough()
            keys = set(req.params.get("TagKeys") or [])
            obj.tags = [t for t in obj.tags if t["Key"] not in keys]
        return json_response(req, {})

    def list_tags(self, req: AwsRequest) -> RawResponse:
        with self.ctx.locked():
            obj = self._tagged(str(req.params.get("ResourceArn")))
            if obj is None:
                raise PassThrough()
            return json_response(req, page(req.params, list(obj.tags), "Tags"))


def register_node_ops(ctx: AwsContext, hp: HyperPod) -> None:
    """Register node, event, software-update and tag operations."""
    ops = NodeOps(ctx, hp)
    for operation, handler in (
        ("ListClusterNodes", ops.list_nodes),
        ("DescribeClusterNode", ops.describe_node),
        ("BatchRebootClusterNodes", functools.partial(ops.batch, action="reboot")),
        ("BatchReplaceClusterNodes", functools.partial(ops.batch, action="replace")),
        ("BatchDeleteClusterNodes", ops.batch_delete),
        ("BatchAddClusterNodes", ops.batch_add),
        ("UpdateClusterSoftware", ops.update_software),
        ("StartClusterHealthCheck", ops.health_check),
        ("ListClusterEvents", ops.list_events),
        ("DescribeClusterEvent", ops.describe_event),
        ("AddTags", ops.add_tags),
        ("DeleteTags", ops.delete_tags),
        ("ListTags", ops.list_tags),
    ):
        ctx.route(SM, operation)(handler)
