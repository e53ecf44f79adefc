"""The taskGovernance feature's Kueue objects: what the request may ask, and the objects it renders."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from instantstart.manifests import kueue
from instantstart.services.features.governance import GovernanceToggle


def test_a_queue_is_a_local_queue_on_a_cluster_queue_admitting_its_namespace_only() -> None:
    local = kueue.local_queue("team-a", "research")
    assert local["kind"] == "LocalQueue" and local["metadata"]["namespace"] == "team-a"
    assert local["spec"] == {"clusterQueue": "instantstart-team-a-research"}
    queue = kueue.cluster_queue("team-a", "research", None)
    assert queue["metadata"]["name"] == "instantstart-team-a-research" and "namespace" not in queue["metadata"]
    assert queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    [group] = queue["spec"]["resourceGroups"]
    # Kueue admits only what the queue covers: every resource a training pod requests, from the one flavor.
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "aws.amazon.com/neurondevice",
                                         "vpc.amazonaws.com/efa"]
    [flavor] = group["flavors"]
    assert flavor["name"] == kueue.FLAVOR == kueue.resource_flavor()["metadata"]["name"]
    assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    capped = kueue.cluster_queue("team-a", "research", 8)["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {r["name"]: r["nominalQuota"] for r in capped}["nvidia.com/gpu"] == "8"
    assert {r["name"]: r["nominalQuota"] for r in capped}["aws.amazon.com/neurondevice"] == "8"
    assert kueue.priority_class("training", 100, "batch")["value"] == 100
    assert all(o["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "instantstart"}
               for o in (local, queue, kueue.resource_flavor(), kueue.priority_class("p", 1)))


@pytest.mark.parametrize(("body", "words"), [
    ({"enabled": False, "queues": [{"name": "q"}]}, "need enabled: true"),
    ({"enabled": True, "priorityClasses": [{"name": "p", "value": 1}, {"name": "p", "value": 2}]}, "appear once"),
    ({"enabled": True, "queues": [{"name": "q"}, {"name": "q", "namespace": "default"}]}, "appear once"),
    ({"enabled": True, "queues": [{"name": "Bad_Name"}]}, "name"),
    ({"enabled": True, "priorityClasses": [{"name": "p", "value": 2_000_000_000}]}, "value"),
])
def test_bad_governance_requests_are_refused(body: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        GovernanceToggle.model_validate(body)
    ok = GovernanceToggle.model_validate({"enabled": True, "queues": [{"name": "q"}, {"name": "q", "namespace": "b"}]})
    assert [(q.namespace, q.name) for q in ok.queues] == [("default", "q"), ("b", "q")]
