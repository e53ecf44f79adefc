"""The instance-group field allowlist: a property test that every allowlisted field survives a scale."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from instantstart.services.capacity.group_allowlist import ALLOWLIST, EXTRA, resubmit_spec

names = st.from_regex(r"[a-z][a-z0-9]{0,10}(-[a-z0-9]{1,8})?", fullmatch=True)
ids = st.text(alphabet="0123456789abcdef", min_size=8, max_size=17)

# Values DescribeCluster can report for each allowlisted field (InstanceCount comes from TargetCount).
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "InstanceType": st.sampled_from(["ml.g6.4xlarge", "ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.trn2.48xlarge"]),
    "LifeCycleConfig": st.builds(
        lambda b, s: {"SourceS3Uri": f"s3://{b}/lifecycle/", "OnCreate": s}, names, st.sampled_from(["on_create.sh"])
    ),
    "ExecutionRole": names.map(lambda n: f"arn:aws:iam::111122223333:role/{n}"),
    "ThreadsPerCore": st.sampled_from([1, 2]),
    "InstanceStorageConfigs": st.lists(
        st.integers(1, 16384).map(lambda gb: {"EbsVolumeConfig": {"VolumeSizeInGB": gb}}), min_size=1, max_size=4
    ),
    "OnStartDeepHealthChecks": st.lists(
        st.sampled_from(["InstanceStress", "InstanceConnectivity", "MultiNodeTrainingValidation"]),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    "TrainingPlanArn": names.map(lambda n: f"arn:aws:sagemaker:us-west-2:111122223333:training-plan/{n}"),
    "OverrideVpcConfig": st.builds(
        lambda s, g: {"SecurityGroupIds": [f"sg-{g}"], "Subnets": [f"subnet-{s}"]}, ids, ids
    ),
    "ScheduledUpdateConfig": st.sampled_from(
        [{"ScheduleExpression": "cron(0 3 ? * SUN *)"}, {"ScheduleExpression": "cron(30 1 1 * ? *)"}]
    ),
    "CapacityRequirements": st.sampled_from([{"Spot": {}}, {"OnDemand": {}}]),
    "NetworkInterface": st.sampled_from([{"InterfaceType": "efa"}, {"InterfaceType": "efa-only"}]),
}
# Read-only state that must never be resubmitted.
READ_ONLY: dict[str, st.SearchStrategy[Any]] = {
    "CurrentCount": st.integers(0, 100),
    "MinCount": st.integers(0, 5),
    "Status": st.sampled_from(["InService", "Updating", "Degraded", "SystemUpdating"]),
    "ActiveOperations": st.just({"Scaling": 1}),
    "CurrentImageReleaseVersion": st.just("2025.1.0"),
    "DesiredImageReleaseVersion": st.just("2025.2.0"),
    "ImageVersionStatus": st.sampled_from(["UpToDate", "UpdateAvailable"]),
    "SoftwareUpdateStatus": st.sampled_from(["Succeeded", "Pending"]),
    "TrainingPlanStatus": st.just("Active"),
    "InstanceTypeDetails": st.just([{"InstanceType": "ml.g6.4xlarge", "CurrentCount": 1, "ThreadsPerCore": 1}]),
    "TargetStateCount": st.integers(0, 10),
}


@st.composite
def described_groups(draw: st.DrawFn) -> dict[str, Any]:
    """A group as DescribeCluster reports it: any subset of the allowlisted fields plus read-only state."""
    group: dict[str, Any] = {"InstanceGroupName": draw(names), "TargetCount": draw(st.integers(0, 6758))}
    for key in draw(st.sets(st.sampled_from(sorted(FIELDS)))):
        group[key] = draw(FIELDS[key])
    for key in draw(st.sets(st.sampled_from(sorted(READ_ONLY)))):
        group[key] = draw(READ_ONLY[key])
    if draw(st.booleans()):
        image = "ami-" + draw(ids)
        group["CurrentImageId"] = group["DesiredImageId"] = image
    if draw(st.booleans()):
        labels = draw(st.dictionaries(names, names, max_size=3))
        taints = [{"Key": k, "Value": "true", "Effect": "NoSchedule"} for k in draw(st.lists(names, max_size=2))]
        group["KubernetesConfig"] = {
            "CurrentLabels": labels,
            "DesiredLabels": labels,
            "CurrentTaints": taints,
            "DesiredTaints": taints,
        }
    return group


@settings(max_examples=300, deadline=None)
@given(described_groups(), st.integers(0, 6758))
def test_every_allowlisted_field_survives_a_scale(group: dict[str, Any], count: int) -> None:
    before = copy.deepcopy(group)
    spec = resubmit_spec(group, count=count)
    assert group == before  # the described group is not modified
    assert spec["InstanceCount"] == count
    for key in ALLOWLIST:
        if key in group:
            assert spec[key] == group[key], key
    if "DesiredImageId" in group:
        assert spec["ImageId"] == group["DesiredImageId"]
    if "KubernetesConfig" in group:
        kube = group["KubernetesConfig"]
        assert spec["KubernetesConfig"] == {"Labels": kube["DesiredLabels"], "Taints": kube["DesiredTaints"]}
    # Nothing outside the allowlist (and the two reshaped fields) is ever sent back.
    assert set(spec) <= set(ALLOWLIST) | set(EXTRA)
    assert not set(spec) & set(READ_ONLY)


@settings(max_examples=100, deadline=None)
@given(described_groups())
def test_resubmitting_without_a_count_keeps_the_target(group: dict[str, Any]) -> None:
    spec = resubmit_spec(group)
    assert spec["InstanceCount"] == group["TargetCount"]
    assert resubmit_spec({**group, **spec}, count=spec["InstanceCount"]) == spec


def test_flexible_groups_are_resubmitted_in_request_shape() -> None:
    described = {
        "InstanceGroupName": "flex",
        "TargetCount": 2,
        "InstanceRequirements": {"DesiredInstanceTypes": ["ml.p5.48xlarge", "ml.p5e.48xlarge"],
                                 "CurrentInstanceTypes": ["ml.p5.48xlarge"]},
    }
    spec = resubmit_spec(described, count=3)
    assert spec == {"InstanceGroupName": "flex", "InstanceCount": 3,
                    "InstanceRequirements": {"InstanceTypes": ["ml.p5.48xlarge", "ml.p5e.48xlarge"]}}
