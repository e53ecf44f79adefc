"""The policies the control plane writes for the roles it creates, against what those roles' principals did on the
twin this session (nodes booting, Mountpoint for S3, HyperPod autoscaling, ...; tests/support/role_usage.py).

Runs last like the control-plane policy test (under xdist the controller checks at session end). (a), always: no
principal was refused an action its role's builder does not grant. (b), only when the whole suite ran and passed:
every action a builder grants was used, or NOT_SIMULATED says why the twin cannot exercise it. The checker itself
is tested on the real builders with one action removed and one unused action added.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hyperpod_twin import role_usage as twin_usage
from hyperpod_twin.iam_eval import evaluate
from instantstart.manifests import iam_policies as pol
from instantstart.manifests import karpenter
from instantstart.services.base.workload_identity import Identity
from instantstart.services.dependencies.catalog import load_catalog
from instantstart.services.features import grafana, tiered
from instantstart.services.features.specs import FEATURES
from instantstart.services.training import mlflow
from tests.support.iam_documents import SCOPE
from tests.support.policy_plugin import FULL_RUN, role_finding
from tests.support.role_usage import (
    NOT_SIMULATED,
    ROLE_BUILDERS,
    Use,
    builder_grants,
    recorded_uses,
    role_findings,
    role_log,
)

EXEC_ROLE = f"instantstart-{SCOPE.cluster_tag}-hyperpod"
CSI_ROLE = f"instantstart-{SCOPE.cluster_tag}-s3-csi"
SCALING_ROLE = f"instantstart-{SCOPE.cluster_tag}-hp-autoscaling"
DATA = f"arn:aws:s3:::{SCOPE.bucket}/{pol.data_prefix(SCOPE.cluster_tag)}x"


def _exercised() -> set[Use]:
    """Uses covering every granted action of every builder that NOT_SIMULATED does not exempt."""
    uses = set()
    for suffix, builder in ROLE_BUILDERS.items():
        exempt = {a for entry in NOT_SIMULATED.get(builder, ()) for a in entry.actions}
        for action in builder_grants()[builder] - exempt:
            uses.add(Use(f"instantstart-{SCOPE.cluster_tag}-{suffix}", action, "arn:aws:x", "Allow"))
    return uses


def test_the_role_names_are_the_ones_the_control_plane_gives() -> None:
    """ROLE_BUILDERS identifies a role by the suffix the control plane names it with: keep them in step."""
    suffixes = {
        "hyperpod": "hyperpod",  # services/cluster/eks_stage.py: instantstart-<tag>-hyperpod
        "s3-csi": next(d.pod_identity.role for d in load_catalog().dependencies if d.pod_identity),
        "hp-autoscaling": karpenter.role_name("t").removeprefix("instantstart-t-"),
        "checkpointing": tiered.ROLE,
        "observability": (FEATURES["observability"].identity or Identity("", "", "")).role,
        "fsx-csi": (FEATURES["fsxCsiDriver"].identity or Identity("", "", "")).role,
        "mlflow-server": mlflow.SERVER_ROLE,
        "mlflow-writer": mlflow.WRITER_ROLE,
        "grafana": grafana.ROLE,
    }
    assert suffixes == {suffix: suffix for suffix in ROLE_BUILDERS}
    assert Use("instantstart-my-team-hp-autoscaling", "a", "r", "Allow").builder == "autoscaling_policy"
    assert Use("instantstart-a-hyperpod", "a", "r", "Allow").builder == "execution_inline_policy"
    assert Use("someone-elses-role", "a", "r", "Allow").builder is None


def test_every_builder_used_in_full_passes_both_directions() -> None:
    assert role_findings(_exercised(), builder_grants(), complete=True) == []


def test_a_refused_action_the_builder_does_not_grant_fails_direction_a() -> None:
    grants = builder_grants()
    grants["execution_inline_policy"] = grants["execution_inline_policy"] - {"ecr:BatchGetImage"}
    uses = _exercised() | {Use(EXEC_ROLE, "ecr:BatchGetImage", "arn:aws:ecr:us-west-2:1:repository/r", "ImplicitDeny")}
    findings = role_findings(uses, grants, complete=False)
    assert len(findings) == 1 and "ecr:BatchGetImage" in findings[0] and "does not grant" in findings[0], findings
    # A refusal of an action the builder grants elsewhere is scoping at work (a test probing it), not a finding.
    probe = Use(CSI_ROLE, "s3:PutObject", f"arn:aws:s3:::{SCOPE.bucket}/lifecycle/x", "ImplicitDeny")
    assert role_findings(_exercised() | {probe}, builder_grants(), complete=False) == []


def test_an_unused_grant_fails_direction_b_only_on_a_complete_run() -> None:
    grants = builder_grants()
    grants["csi_data_policy"] = grants["csi_data_policy"] | {"s3:PutObjectAcl"}
    findings = role_findings(_exercised(), grants, complete=True)
    assert findings == ["csi_data_policy grants actions no principal used in the suite and NOT_SIMULATED does not "
                        "explain: ['s3:PutObjectAcl']"]
    assert role_findings(_exercised(), grants, complete=False) == []


def test_a_stale_allow_list_entry_fails() -> None:
    used = _exercised() | {Use(SCALING_ROLE, "kms:DescribeKey", "arn:aws:kms:us-west-2:1:key/k", "Allow")}
    findings = role_findings(used, builder_grants(), complete=True)
    assert len(findings) == 1 and "NOT_SIMULATED[autoscaling_policy]" in findings[0], findings


def test_every_allow_list_entry_names_granted_actions_a_reason_and_a_source() -> None:
    for builder, entries in NOT_SIMULATED.items():
        for entry in entries:
            assert set(entry.actions) <= builder_grants()[builder], (builder, entry.actions)
            assert len(entry.reason) > 40 and entry.source.startswith("https://"), entry


def test_the_twin_records_each_use_once_with_its_decision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hyperpod_twin.role_usage.use decides like iam_eval and writes the line the checker reads."""
    call_log = tmp_path / "calls.log"
    monkeypatch.setenv(twin_usage.ENV, str(call_log))
    documents = [pol.csi_data_policy(SCOPE)]
    arn = f"arn:aws:iam::{SCOPE.account}:role/{CSI_ROLE}"
    lifecycle = f"arn:aws:s3:::{SCOPE.bucket}/{pol.lifecycle_prefix(SCOPE.cluster_tag)}on_create.sh"
    for _ in range(2):
        assert twin_usage.use(documents, arn, "s3:PutObject", DATA) == evaluate(documents, "s3:PutObject", DATA)
    assert twin_usage.use(documents, arn, "s3:PutObject", lifecycle) == "ExplicitDeny"  # the lifecycle Deny
    lines = role_log(call_log).read_text().splitlines()
    assert lines == [f"{CSI_ROLE} s3:PutObject {DATA} Allow MountpointObjects",
                     f"{CSI_ROLE} s3:PutObject {lifecycle} ExplicitDeny -"]
    assert recorded_uses(role_log(call_log)) == {Use(CSI_ROLE, "s3:PutObject", DATA, "Allow"),
                                                 Use(CSI_ROLE, "s3:PutObject", lifecycle, "ExplicitDeny")}


@pytest.mark.runs_last
def test_role_policies_match_what_their_principals_did(request: pytest.FixtureRequest) -> None:
    """Under xdist this worker saw only part of the session: direction (a) here on the uses so far, and
    tests/support/policy_plugin.check_at_session_end checks both on the controller once every worker is done."""
    call_log = Path(os.environ["HYPERPOD_TWIN_CALL_LOG"])
    if not recorded_uses(role_log(call_log)):
        pytest.skip("no principal used a role the control plane created in this session (no cluster test ran)")
    full = request.config.stash.get(FULL_RUN, False)
    finding = role_finding(call_log, complete=full and not request.session.testsfailed)
    assert finding is None, finding
