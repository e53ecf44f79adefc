"""The role each operation needs, checked in one place (`catalog.invoke`) for every face.

Roles are ordered (principal.ROLES): viewer reads; member also runs jobs, model servers, model downloads and
calls models; operator also drives clusters, capacity, features, storage and teams (a team's compute quota is
capacity, and its member list part of the team); admin also manages users, other users' tokens and reads the audit
trail. Every operation of the catalog has an entry here (a test checks it); an
operation without one needs admin, so a new operation is never open by accident. A member who belongs to teams of a
cluster submits training jobs and model servers (inference_deploy_container) only into those teams' namespaces
(`services/teams/placement.py`); a member of no team, and the other member operations, are not scoped yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from instantstart.catalog.registry import Catalog, OperationSpec
from instantstart.errors import Forbidden
from instantstart.principal import Principal

VIEWER, MEMBER, OPERATOR, ADMIN = "viewer", "member", "operator", "admin"


@dataclass(frozen=True)
class Rule:
    """The least role an operation needs; with `own_field`, a caller naming themselves (or nobody) in that
    field needs only `role`, and naming another user needs admin."""

    role: str
    own_field: str | None = None


_MEMBER_OPS = (
    "inference_autoscaling_apply inference_call_model inference_deploy_container inference_jumpstart_deploy"
    " inference_managed_delete inference_managed_deploy inference_router_deploy inference_scale inference_undeploy"
    " model_download_enhanced ray_job_submit training_job_delete training_job_submit training_recipe_submit"
    " workspace_delete_file workspace_read_file workspace_write_file"
    " usage_report"  # a read, but of who used what: members see their own, operators and admins everyone's
)
_OPERATOR_OPS = (
    "cluster_configure_dependencies cluster_create cluster_create_eks cluster_create_eks_with_cidr cluster_delete"
    " cluster_import cluster_nodegroup_delete cluster_nodegroup_scale cluster_switch cluster_update_plan"
    " cluster_upgrade cluster_validate"
    " fsx_storage_create hyperpod_add_instance_group hyperpod_create hyperpod_delete_instance_group"
    " hyperpod_node_delete hyperpod_node_reboot hyperpod_node_replace hyperpod_scale_instance_group"
    " hyperpod_update_advanced_features hyperpod_update_lifecycle_script hyperpod_update_software"
    " inference_pool_assign inference_pool_release"
    " karpenter_install karpenter_uninstall mlflow_configure operation_cancel operation_retry s3_storage_create"
    " storage_delete alert_rules_update team_create team_delete team_update"
)
# alert_channels_update sends cluster information to a URL the caller names: admin.
_ADMIN_OPS = "alert_channels_update audit_list user_create user_delete user_list user_update"
_OWN_TOKEN_OPS = "token_create token_list token_revoke"
_VIEWER_OPS = (
    "alert_list alert_rules_get cluster_delete_plan cluster_events cluster_get_availability_zones"
    " cluster_get_available_instances"
    " cluster_get_dependency_status cluster_get_eks_creation_status cluster_get_instance_groups cluster_get_status"
    " cluster_list_all cluster_list_workloads cluster_plan_create cluster_timeline cluster_upgrade_plan"
    " fsx_storage_list"
    " hyperpod_get_advanced_features hyperpod_get_creation_status inference_list_public_services"
    " inference_list_services inference_managed_lint inference_managed_list job_get_status job_list_all"
    " karpenter_get_status model_download_status model_list monitoring_gpu_utilization node_describe node_list"
    " operation_get operation_list pod_logs team_list s3_storage_get_defaults s3_storage_list_contents storage_list"
    " training_history training_job_list training_job_logs training_recipe_list user_me wait_seconds"
    " workspace_list_files"
)

RULES: dict[str, Rule] = {
    **{name: Rule(VIEWER) for name in _VIEWER_OPS.split()},
    **{name: Rule(MEMBER) for name in _MEMBER_OPS.split()},
    **{name: Rule(OPERATOR) for name in _OPERATOR_OPS.split()},
    **{name: Rule(ADMIN) for name in _ADMIN_OPS.split()},
    **{name: Rule(VIEWER, own_field="user") for name in _OWN_TOKEN_OPS.split()},
}
UNLISTED = Rule(ADMIN)


def rule_for(spec: OperationSpec) -> Rule:
    """The rule of an operation (admin for one missing from the table)."""
    return RULES.get(spec.name, UNLISTED)


def _refuse(spec: OperationSpec, principal: Principal, needed: str, why: str = "") -> Forbidden:
    return Forbidden(
        f"{spec.name} needs the role {needed}{why}; {principal.user} has the role {principal.role}.",
        hint=f"Ask an admin to give you the role {needed} (`instantstart user update --name {principal.user}"
        f" --role {needed}`), or use a tool your role may call (`instantstart user me`).",
        details={"operation": spec.name, "requiredRole": needed, "role": principal.role},
    )


def check_role(spec: OperationSpec, principal: Principal) -> None:
    """Raise Forbidden when the caller's role is below the operation's (before its input is even read)."""
    rule = rule_for(spec)
    if not principal.at_least(rule.role):
        raise _refuse(spec, principal, rule.role)


def check_owner(spec: OperationSpec, principal: Principal, target: str | None) -> None:
    """Raise Forbidden when a non-admin names another user in the operation's `own_field`."""
    rule = rule_for(spec)
    if rule.own_field is not None and target not in (None, principal.user) and not principal.at_least(ADMIN):
        raise _refuse(spec, principal, ADMIN, " to act on another user's tokens")


def allowed(catalog: Catalog, principal: Principal) -> list[str]:
    """The names of the operations `principal` may call (own-token operations included)."""
    return [spec.name for spec in catalog if principal.at_least(rule_for(spec).role)]
