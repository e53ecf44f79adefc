"""Pure pieces of the EKS upgrade plan: the next minor version, a chart's kubeVersion constraint against the target,
the removed-API table, and the add-on version chosen from DescribeAddonVersions for the target."""

from __future__ import annotations

import pytest

from instantstart.manifests.kube_versions import next_minor, removed_apis, satisfies
from instantstart.services.cluster.upgrade_plan import choose_addon_version
from instantstart.services.dependencies.catalog import Dependency


def test_next_minor() -> None:
    assert next_minor("1.32") == "1.33"
    assert next_minor("v1.29.15-eks-1") == "1.30"
    with pytest.raises(ValueError, match="not a Kubernetes version"):
        next_minor("latest")


@pytest.mark.parametrize(
    ("constraint", "version", "allowed"),
    [
        ("", "1.40", True),
        (">=1.23.0-0", "1.33", True),
        (">= 1.21.0, < 1.33.0", "1.33", False),
        (">= 1.21.0 < 1.34.0", "1.33", True),
        ("<1.33.0-0", "1.33", False),
        ("~1.32", "1.33", False),
        ("~1.32.1", "1.32", False),
        ("^1.20", "1.33", True),
        ("1.32.x", "1.33", False),
        ("<1.30.0 || >=1.33.0-0", "1.33", True),
        ("<1.30.0 || >=1.34.0-0", "1.33", False),
    ],
)
def test_chart_kube_version_constraints(constraint: str, version: str, allowed: bool) -> None:
    assert satisfies(constraint, version) is allowed


def test_unreadable_constraint_is_an_error() -> None:
    with pytest.raises(ValueError, match="unreadable kubeVersion clause"):
        satisfies(">=one.two", "1.33")


def test_removed_apis_named_for_the_target_only() -> None:
    beta3 = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1beta3", "kind": "FlowSchema", "metadata": {"name": "ours"}}
    stable = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "fine"}}
    assert removed_apis("1.31", [("helm release x", beta3)]) == []
    [finding] = removed_apis("1.32", [("helm release x", beta3), ("helm release x", stable)])
    assert (finding.source, finding.name, finding.removed_in, finding.replacement) == (
        "helm release x", "ours", "1.32", "flowcontrol.apiserver.k8s.io/v1")


def _offered(*versions: str, default: str | None = None) -> list[dict[str, object]]:
    return [{"addonVersion": v, "compatibilities": [{"clusterVersion": "1.33", "defaultVersion": v == default}]}
            for v in versions]


def _dep(**extra: object) -> Dependency:
    return Dependency.model_validate({"name": "metrics-server", "source": "addon", "addon": "metrics-server",
                                      "namespace": "kube-system", **extra})


def test_addon_version_choice() -> None:
    offered = _offered("v0.8.1-eksbuild.1", "v0.8.0-eksbuild.2", "v0.7.9-eksbuild.1", default="v0.7.9-eksbuild.1")
    # Compatible: kept.
    assert choose_addon_version(offered, "1.33", "v0.8.0-eksbuild.2", None) == (True, "v0.8.0-eksbuild.2")
    # Not offered for the target: the target's default version …
    assert choose_addon_version(offered, "1.33", "v0.6.0-eksbuild.1", None) == (False, "v0.7.9-eksbuild.1")
    # … the catalog's pin when EKS offers it …
    assert choose_addon_version(offered, "1.33", "v0.6.0", _dep(version="v0.8.0-eksbuild.2")) == (
        False, "v0.8.0-eksbuild.2")
    # … the newest at or above the catalog's minimum when the default is below it.
    assert choose_addon_version(offered, "1.33", "v0.6.0", _dep(minVersion="v0.8.0")) == (False, "v0.8.1-eksbuild.1")
    # Nothing offered: nothing to move to.
    assert choose_addon_version([], "1.33", "v0.6.0", None) == (False, None)
