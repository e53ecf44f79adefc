"""The observability feature's optional Amazon Managed Grafana workspace: an existing one adopted by id, or one
created for the cluster (tagged, with a role that reads its AMP workspace), deleted only if InstantStart made it."""

from __future__ import annotations

from typing import Any

from instantstart.aws import grafana as grafana_api
from instantstart.aws.clients import AwsClients
from instantstart.context import StageContext
from instantstart.errors import DependencyFailed, InvalidInput, PreconditionFailed
from instantstart.manifests import iam_feature_policies as feature_pol
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.observability import current_grafana, summary
from instantstart.services.base.registry import record_facts
from instantstart.services.base.workload_identity import Where, ensure_role, remove_role
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import TAG_CLUSTER, mark_gone, record, resources_of, tag_map

ID_FIELD = "observability.grafanaWorkspaceId"
CREATE_FIELD = "observability.grafana"
ROLE = "grafana"
RESOURCE_TYPE = "grafana:workspace"
WAIT_SECONDS = 1200  # a new workspace takes minutes to become ACTIVE
BUSY = ("CREATING", "UPDATING", "UPGRADING", "VERSION_UPDATING")
DETAILS_KEY = "grafana"


def name_of(tag: str) -> str:
    """The name InstantStart gives the cluster's workspace."""
    return f"instantstart-{tag}"


def check_adoptable(aws: AwsClients, region: str, workspace_id: str) -> dict[str, Any]:
    """The workspace to adopt, which must exist in the cluster's Region and be ACTIVE (InvalidInput / PreconditionFailed
    naming observability.grafanaWorkspaceId otherwise)."""
    found = grafana_api.describe_workspace(aws, region, workspace_id)
    if found is None:
        raise InvalidInput(
            f"{ID_FIELD}: no Amazon Managed Grafana workspace {workspace_id} in {region}.",
            hint=f"Pass the id (g-…) of a workspace in {region} (Amazon Managed Grafana console, or "
            "`aws grafana list-workspaces`), or send observability.grafana: true to have one created.",
            details={"fields": [{"field": ID_FIELD, "message": f"workspace {workspace_id} not found in {region}"}]},
        )
    status = str(found.get("status"))
    if status != "ACTIVE":
        when = "wait until it is ACTIVE, then send the request again" if status in BUSY else \
            "repair or replace it in the Amazon Managed Grafana console, or send observability.grafana: true instead"
        raise PreconditionFailed(
            f"{ID_FIELD}: the Amazon Managed Grafana workspace {workspace_id} is {status}, not ACTIVE.",
            hint=f"Adopt only an ACTIVE workspace: {when}.",
            details={"fields": [{"field": ID_FIELD, "message": f"workspace status {status}, must be ACTIVE"}]},
        )
    return found


def find_created(where: Where) -> dict[str, Any] | None:
    """The workspace InstantStart created for the cluster (found by the cluster tag), if any."""
    return grafana_api.find_tagged(where.aws, where.region, TAG_CLUSTER, where.tag)


def ensure_created(where: Where, amp_workspace_arn: str) -> tuple[dict[str, Any], list[str]]:
    """The cluster's own workspace and its data-source role: found by the cluster tag, else created (ledgered,
    tagged); the role is brought to exactly its trust and query policy. (workspace, what was written)."""
    role_arn, wrote = ensure_role(where, where.role_name(ROLE), feature_pol.grafana_trust(amp_workspace_arn), (),
                                  feature_pol.grafana_query_policy(amp_workspace_arn))
    wrote = [f"grafana.{w}" for w in wrote]
    found = find_created(where)
    if found is None:
        tags = tag_map(where.tag, where.operation_id, installation_id(where.db))
        found = grafana_api.create_workspace(
            where.aws, where.region, name=name_of(where.tag), role_arn=role_arn, tags=tags,
            description=f"InstantStart: HyperPod cluster {where.tag} (AMP data source {amp_workspace_arn})",
            client_token=f"{where.operation_id}-grafana"[:64],
        )
        record(where.db, cluster_tag=where.tag, operation_id=where.operation_id, resource_type=RESOURCE_TYPE,
               resource_id=str(found["id"]), region=where.region)
        wrote.append("grafana.workspace")
    return found, wrote


def ours_recorded(where: Where) -> bool:
    """Whether the ledger holds a Grafana workspace (or its role) InstantStart created for the cluster: only
    then does disabling look for one (so a control plane without Grafana permissions can still turn observability
    off when it never asked for Grafana)."""
    role = where.role_name(ROLE)
    return any(r.resource_type == RESOURCE_TYPE or (r.resource_type == "iam:role" and r.resource_id == role)
               for r in resources_of(where.db, where.tag))


def remove_created(where: Where, keep: str | None = None) -> list[str]:
    """Delete the workspace InstantStart created for the cluster and its role (adopted workspaces are never
    touched, nor ours when it is `keep`); what went. Nothing is looked up unless the ledger records one."""
    removed: list[str] = []
    if not ours_recorded(where):
        return removed
    found = find_created(where)
    if found is not None and found["id"] == keep:
        return removed
    if found is not None:
        grafana_api.delete_workspace(where.aws, where.region, str(found["id"]))
        mark_gone(where.db, resource_type=RESOURCE_TYPE, resource_id=str(found["id"]), region=where.region)
        removed.append("observability.grafanaWorkspace")
    if remove_role(where, where.role_name(ROLE)):
        removed.append("observability.grafanaRole")
    return removed


async def wait_active(stage: StageContext, where: Where, workspace_id: str) -> dict[str, Any]:
    """Wait (with progress) until the workspace is ACTIVE; DependencyFailed when it ends otherwise."""
    last: dict[str, Any] = {}

    async def check() -> tuple[bool, str]:
        found = await blocking(grafana_api.describe_workspace, where.aws, where.region, workspace_id)
        status = str((found or {}).get("status") or "gone")
        if found is None or status not in ("ACTIVE", *BUSY):
            raise DependencyFailed(
                f"observability: the Amazon Managed Grafana workspace {workspace_id} is {status}.",
                hint="Check the workspace in the Amazon Managed Grafana console (IAM Identity Center must be enabled "
                "for AWS_SSO sign-in); send observability.grafana: false to remove it, then true to create it again.",
            )
        last.update(found)
        return status == "ACTIVE", f"observability: Grafana workspace {workspace_id} is {status}"

    await wait_until(stage, check, limit_seconds=WAIT_SECONDS, what=f"Grafana workspace {workspace_id}")
    return last


async def reconcile(stage: StageContext, where: Where, settings: dict[str, Any], amp_workspace_arn: str,
                    recorded: dict[str, Any] | None) -> tuple[dict[str, Any] | None, list[str]]:
    """Bring the Grafana workspace to what `settings` ask (grafanaWorkspaceId: adopt; grafana true: ours; grafana
    false: none; neither: as it was); (its summary, what changed). Remembered on the cluster row."""
    adopt = settings.get("grafanaWorkspaceId")
    create = settings.get("grafana")
    changed: list[str] = []
    if adopt:
        workspace = await blocking(check_adoptable, where.aws, where.region, str(adopt))
        # One of ours is replaced by the adopted one; "adopting" our own workspace keeps it ours.
        changed += await blocking(remove_created, where, str(adopt))
        ours = (workspace.get("tags") or {}).get(TAG_CLUSTER) == where.tag and await blocking(ours_recorded, where)
        await blocking(record_facts, where.db, where.tag, grafana={"workspaceId": adopt,
                                                                           "created": ours})
        return summary(workspace, ours), changed
    if create is False:
        changed += await blocking(remove_created, where)
        await blocking(record_facts, where.db, where.tag, grafana=None)
        return None, changed
    if create is True:
        found, wrote = await blocking(ensure_created, where, amp_workspace_arn)
        await stage.progress(f"observability: Grafana workspace {found['id']} is {found.get('status')}")
        found = await wait_active(stage, where, str(found["id"]))
        await blocking(record_facts, where.db, where.tag, grafana={"workspaceId": found["id"],
                                                                           "created": True})
        return summary(found, True), changed + wrote
    return await blocking(current_grafana, where.aws, where.region, where.tag, recorded), changed
