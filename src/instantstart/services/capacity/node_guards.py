"""What a node replacement or deletion checks first: the cluster is ours, the lifecycle script unchanged."""

from __future__ import annotations

from typing import Any

from instantstart.aws import hyperpod as hp
from instantstart.aws.clients import AwsClients
from instantstart.aws.hyperpod import HyperPod
from instantstart.context import AppContext
from instantstart.errors import PreconditionFailed
from instantstart.services.base.lifecycle import verify_groups
from instantstart.services.core.ledger import TAG_INSTALLATION


def refuse_unowned(app: AppContext, region: str, cluster: str, action: str) -> None:
    """Deleting or replacing nodes is allowed by the control-plane policy only on a HyperPod cluster carrying the
    installation tag (one InstantStart created): an imported cluster without it is refused here, saying why,
    rather than by IAM halfway through an operation (blocking)."""
    found = hp.describe_cluster(app.aws, region, cluster)
    if found is None or TAG_INSTALLATION in hp.cluster_tags(app.aws, region, str(found["ClusterArn"])):
        return
    raise PreconditionFailed(
        f"HyperPod cluster {cluster} carries no {TAG_INSTALLATION} tag: InstantStart did not create it, and its IAM "
        f"policy lets it {action} nodes only on clusters it created.",
        hint=f"Reboot works on any cluster. To let InstantStart {action} nodes here, tag the cluster "
        f"{TAG_INSTALLATION}=<any value> (sagemaker add-tags), or {action} the node in the SageMaker console.",
        details={"cluster": cluster, "missingTag": TAG_INSTALLATION},
    )


def verify_node_script(aws: AwsClients, region: str, cluster: str, node: dict[str, Any],
                       approved: dict[str, str] | None = None) -> None:
    """Verify the lifecycle script a replacement of `node` runs as root (its instance group's; `approved`: the
    scripts an operator uploaded, lifecycle.approved_scripts); Conflict with the fix when it changed (blocking)."""
    described = HyperPod(aws, region).describe_cluster(cluster) or {}
    group = node.get("InstanceGroupName")
    groups = described.get("InstanceGroups") or []
    verify_groups(aws, region, [g for g in groups if g.get("InstanceGroupName") == group], only_ours=True,
                  approved=approved)
