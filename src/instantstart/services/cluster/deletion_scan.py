"""What the deletion plan finds beyond the ledger: load balancers and resources tagged with the cluster tag
(split by whether this installation's id is on them)."""

from __future__ import annotations

import logging

from instantstart.aws import ec2_network, elbv2, fsx
from instantstart.context import AppContext
from instantstart.kube import core_kinds, wire
from instantstart.kube.calls import kube_api, kube_call
from instantstart.services.base.network import tagged
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import TAG_CLUSTER, TAG_INSTALLATION
from instantstart.store.models import ClusterRow

log = logging.getLogger(__name__)


def tag_scan(app: AppContext, row: ClusterRow) -> list[tuple[str, str, bool]]:
    """Network resources carrying the cluster tag (orphans a crash may have left out of the ledger), each with
    whether it carries this installation's id (False: tagged elsewhere, planned only on opt-in).
    Tags are checked on each item as well as asked of EC2 (see network.tagged)."""
    f = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [row.tag]}]
    mine = installation_id(app.db)
    found: list[tuple[str, str, bool]] = []
    for kind, (_, _, id_key) in ec2_network.TAGGED.items():
        for item in tagged(ec2_network.tagged_resources(app.aws, row.region, kind, f), row.tag):
            state = str(item.get("State", "")).lower()
            if kind in ("ec2:nat-gateway", "ec2:vpc-endpoint") and state in ("deleted", "deleting"):
                continue
            tags = {t["Key"]: t["Value"] for t in item.get("Tags", []) or []}
            found.append((kind, item[id_key], tags.get(TAG_INSTALLATION) == mine))
    for fs in fsx.tagged(app.aws, row.region, TAG_CLUSTER, row.tag):
        if fs.get("Lifecycle") == "DELETING":
            continue
        tags = {t["Key"]: t["Value"] for t in fs.get("Tags") or []}
        found.append(("fsx:file-system", str(fs["FileSystemId"]), tags.get(TAG_INSTALLATION) == mine))
    return found


def load_balancer_holders(app: AppContext, row: ClusterRow) -> list[tuple[str, str]]:
    """Kubernetes Services of type LoadBalancer (their controller owns AWS load balancers) and the ELBv2
    load balancers tagged for this EKS cluster; empty when the cluster or its API is gone."""
    found: list[tuple[str, str]] = []
    try:
        api = kube_api(app.kube, row.eks_cluster_name, row.region)
        services = wire.items(kube_call("list services", core_kinds.list_services, api, None))
        found += [
            ("k8s:loadbalancer-service", f"{wire.namespace(svc)}/{wire.name(svc)}")
            for svc in services
            if wire.service_type(svc) == "LoadBalancer" and wire.metadata(svc)
        ]
    except Exception:
        log.info("deletion plan: Kubernetes API of %s not reachable; no Services listed", row.eks_cluster_name)
    for arn, tags in elbv2.load_balancer_tags(app.aws, row.region).items():
        if tags.get("elbv2.k8s.aws/cluster") == row.eks_cluster_name or tags.get(TAG_CLUSTER) == row.tag:
            found.append(("elbv2:load-balancer", arn))
    return found
