"""Requests real AWS refuses by its model's constraints are refused by the twin with the same code.

The refused requests are generated from botocore's service models: each case takes a valid request
and breaks one constraint the model declares on a member (maximum length or value, list or map size,
pattern, enum) that botocore does not check on the client, then sends it with boto3.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.model import Shape

from hyperpod_twin.twin import Twin

ACCOUNT = "111122223333"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/hyperpod-exec"
EKS_ARN = f"arn:aws:eks:us-west-2:{ACCOUNT}:cluster/fid"

# Valid requests (each passes the model); the cases break one member at a time.
BASES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "sagemaker",
        "CreateCluster",
        {
            "ClusterName": "fid",
            "Orchestrator": {"Eks": {"ClusterArn": EKS_ARN}},
            "InstanceGroups": [
                {
                    "InstanceGroupName": "workers",
                    "InstanceType": "ml.g5.8xlarge",
                    "InstanceCount": 1,
                    "ExecutionRole": ROLE,
                    "LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lifecycle", "OnCreate": "on_create.sh"},
                    "ThreadsPerCore": 1,
                    "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
                    "OnStartDeepHealthChecks": ["InstanceStress"],
                    "KubernetesConfig": {
                        "Labels": {"team": "a"},
                        "Taints": [{"Key": "dedicated", "Value": "a", "Effect": "NoSchedule"}],
                    },
                }
            ],
            "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
            "NodeRecovery": "Automatic",
            "Tags": [{"Key": "k", "Value": "v"}],
        },
    ),
    ("sagemaker", "ListClusters", {"MaxResults": 10, "SortBy": "NAME", "SortOrder": "Ascending", "NameContains": "x"}),
    ("sagemaker", "DescribeCluster", {"ClusterName": "fid"}),
    ("sagemaker", "ListClusterNodes", {"ClusterName": "fid", "MaxResults": 10, "SortOrder": "Ascending"}),
    ("sagemaker", "BatchDeleteClusterNodes", {"ClusterName": "fid", "NodeIds": ["i-0123456789abcdef0"]}),
    (
        "eks",
        "CreateCluster",
        {
            "name": "fid",
            "roleArn": f"arn:aws:iam::{ACCOUNT}:role/eks",
            "resourcesVpcConfig": {"subnetIds": ["subnet-1", "subnet-2"]},
            "accessConfig": {"authenticationMode": "API"},
            "tags": {"k": "v"},
        },
    ),
    ("eks", "ListClusters", {"maxResults": 10}),
    ("eks", "CreateAddon", {"clusterName": "fid", "addonName": "cert-manager", "resolveConflicts": "OVERWRITE"}),
    (
        "eks",
        "CreateAccessEntry",
        {"clusterName": "fid", "principalArn": ROLE, "type": "STANDARD", "tags": {"k": "v"}},
    ),
    (
        "eks",
        "AssociateAccessPolicy",
        {
            "clusterName": "fid",
            "principalArn": ROLE,
            "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
            "accessScope": {"type": "cluster"},
        },
    ),
    (
        "fsx",
        "CreateFileSystem",
        {
            "FileSystemType": "LUSTRE",
            "StorageCapacity": 1200,
            "SubnetIds": ["subnet-0123456789abcdef0"],
            "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
        },
    ),
]
_BAD_TEXTS = ("!! not valid !!", "-", "a b", "0", "arn:bad")


@dataclass
class Case:
    """One request that breaks exactly one model constraint."""

    service: str
    operation: str
    params: dict[str, Any]
    path: str  # the member as AWS names it in the message (lowerCamel, `.N.member.` in lists)
    rule: str  # the constraint's wording

    @property
    def id(self) -> str:
        return f"{self.service}.{self.operation}:{self.path}:{self.rule.split()[0]}"


def _aws_path(parent: str, name: str) -> str:
    name = name[:1].lower() + name[1:]
    return f"{parent}.{name}" if parent else name


def _broken_string(shape: Shape) -> Iterator[tuple[str, str]]:
    meta = shape.metadata
    enum = getattr(shape, "enum", None) or []
    if enum:
        yield "NotAModelValue", "satisfy enum value set"
        return
    if "max" in meta:
        yield "a" * (int(meta["max"]) + 1), f"have length less than or equal to {meta['max']}"
    pattern = meta.get("pattern")
    if pattern:
        try:
            compiled = re.compile(pattern)
        except re.error:
            return
        lo, hi = int(meta.get("min", 0)), int(meta.get("max", 10**6))
        for text in _BAD_TEXTS:
            if lo <= len(text) <= hi and compiled.fullmatch(text) is None:
                yield text, "satisfy regular expression pattern"
                return


def _mutations(shape: Shape, value: Any, path: str) -> Iterator[tuple[Any, str, str]]:
    """(replacement value, path, rule) for each constraint a member of `value` can be made to break."""
    kind, meta = shape.type_name, shape.metadata
    if kind == "structure" and isinstance(value, dict):
        for name, member in shape.members.items():  # type: ignore[attr-defined]
            if name in value:
                for bad, p, rule in _mutations(member, value[name], _aws_path(path, name)):
                    yield {**value, name: bad}, p, rule
    elif kind == "list" and isinstance(value, list) and value:
        if "max" in meta:
            yield [value[0]] * (int(meta["max"]) + 1), path, f"have length less than or equal to {meta['max']}"
        for bad, p, rule in _mutations(shape.member, value[0], f"{path}.1.member"):  # type: ignore[attr-defined]
            yield [bad, *value[1:]], p, rule
    elif kind == "map" and isinstance(value, dict) and "max" in meta:
        too_many = {f"k{i}": "v" for i in range(int(meta["max"]) + 1)}
        yield too_many, path, f"have length less than or equal to {meta['max']}"
    elif kind == "string" and isinstance(value, str):
        for bad, rule in _broken_string(shape):
            yield bad, path, rule
    elif kind in ("integer", "long") and isinstance(value, int) and "max" in meta:
        yield int(meta["max"]) + 1, path, f"have value less than or equal to {meta['max']}"


def generated_cases() -> list[Case]:
    """Every single-constraint violation the models allow for the base requests."""
    session = botocore.session.get_session()
    cases: list[Case] = []
    for service, operation, base in BASES:
        shape = session.get_service_model(service).operation_model(operation).input_shape
        assert shape is not None
        for params, path, rule in _mutations(shape, copy.deepcopy(base), ""):
            cases.append(Case(service, operation, params, path, rule))
    return cases


CASES = generated_cases()


def test_the_models_yield_enough_cases() -> None:
    assert len(CASES) >= 20
    assert {c.service for c in CASES} == {"sagemaker", "eks", "fsx"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_twin_refuses_what_the_model_refuses(aws_twin: Twin, case: Case) -> None:
    client = aws_twin.boto3_client(case.service)
    call = getattr(client, botocore.xform_name(case.operation))
    with pytest.raises(ClientError) as info:
        call(**case.params)
    error = info.value.response["Error"]
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    if case.service == "eks":
        # EKS validates parameters itself: InvalidParameterException, its own words for names and lengths.
        assert error["Code"] == "InvalidParameterException"
        leaf = case.path.split(".")[-1]
        if case.rule.startswith("satisfy regular expression pattern") and "'" not in error["Message"][:4]:
            assert error["Message"].startswith(f"The {leaf} parameter contains invalid characters.")
            return
        if case.rule.startswith("have length less than or equal to") and error["Message"].startswith("The "):
            assert error["Message"] == (f"The parameter {leaf} should not be greater than "
                                        f"{case.rule.rsplit(' ', 1)[1]} characters.")
            return
        assert error["Message"].startswith("1 validation error detected: Value ")
    else:
        assert error["Code"] == "ValidationException"
        assert re.match(r"^\d+ validation errors? detected: Value ", error["Message"])
    assert f"at '{case.path}' failed to satisfy constraint: Member must {case.rule}" in error["Message"]


def test_eks_answers_its_own_invalid_parameter_wording(aws_twin: Twin) -> None:
    # As EKS answers (InvalidParameterException texts quoted in aws/aws-cdk#30632 and
    # surajincloud/kubectl-eks#72): the model declares no ValidationException for EKS.
    eks = aws_twin.boto3_client("eks")
    with pytest.raises(ClientError) as info:
        eks.describe_cluster(name="bad name!")
    assert info.value.response["Error"] == {
        "Code": "InvalidParameterException",
        "Message": 'The name parameter contains invalid characters. It should conform to the regular expression '
                   '"^[0-9A-Za-z][A-Za-z0-9-_]*"In other words, it should start with a number or letter, and can '
                   "contain numbers, letters, dashes, and underscores."}
    with pytest.raises(ClientError) as info:
        eks.list_nodegroups(clusterName="x" * 101)
    assert info.value.response["Error"]["Code"] == "InvalidParameterException"
    assert info.value.response["Error"]["Message"] == (
        "The parameter clusterName should not be greater than 100 characters.")


@pytest.mark.parametrize("service, operation, params", BASES, ids=[f"{s}.{o}" for s, o, _ in BASES])
def test_the_base_requests_pass_the_model(aws_twin: Twin, service: str, operation: str, params: dict[str, Any]) -> None:
    """The unbroken requests get past the model check (whatever the service then answers)."""
    client = aws_twin.boto3_client(service)
    try:
        getattr(client, botocore.xform_name(operation))(**params)
    except ClientError as err:
        assert "validation error" not in err.response["Error"]["Message"]


def test_a_bad_next_token_is_a_validation_error_not_an_internal_failure(aws_twin: Twin) -> None:
    sm = aws_twin.boto3_client("sagemaker")
    with pytest.raises(ClientError) as info:
        sm.list_clusters(NextToken="not-a-token")
    assert info.value.response["Error"]["Code"] == "ValidationException"
    eks = aws_twin.boto3_client("eks")
    with pytest.raises(ClientError) as info:
        eks.list_addons(clusterName="nope", nextToken="garbage")
    assert info.value.response["Error"]["Code"] in ("InvalidParameterException", "ResourceNotFoundException")


def test_every_instance_type_of_the_model_has_hardware_facts() -> None:
    from hyperpod_twin.aws import instance_types

    model = botocore.session.get_session().get_service_model("sagemaker")
    enum = model.shape_for("ClusterInstanceType").enum  # type: ignore[attr-defined]
    assert len(enum) > 200
    assert [name for name in enum if instance_types.get(name) is None] == []
