"""The `keda` and `taskGovernance` feature keys on a fresh cluster: KEDA's chart and the task governance add-on
(which installs Kueue) come up through hyperpod_update_advanced_features, their CRDs served and controllers Ready;
turning one off removes only it."""

from __future__ import annotations

from typing import Any

from tests.support.flows import make_hyperpod, mcp_calls, mcp_wait
from tests.support.servers import Running

TAG = "kg1"


def state(cp: Running) -> dict[str, Any]:
    [features] = mcp_calls(cp, [("hyperpod_get_advanced_features", {})])
    return dict(features)


def test_keda_and_task_governance_are_feature_keys(cp: Running) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG)
    before = state(cp)
    assert not before["keda"]["enabled"] and not before["taskGovernance"]["enabled"]

    [on] = mcp_calls(cp, [("hyperpod_update_advanced_features",
                           {"keda": {"enabled": True}, "taskGovernance": {"enabled": True}})])
    view = mcp_wait(cp, on["operationId"])
    assert view["status"] == "SUCCEEDED", view
    after = state(cp)
    keda, governance = after["keda"], after["taskGovernance"]
    assert keda["state"] == "ENABLED" and governance["state"] == "ENABLED", (keda, governance)
    assert [c["name"] for c in keda["actual"]["crds"] if c["served"]] == ["scaledobjects.keda.sh"]
    assert {c["name"] for c in governance["actual"]["crds"] if c["served"]} == {
        "clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io"}
    assert all(c["ready"] for c in [*keda["actual"]["controllers"], *governance["actual"]["controllers"]])
    assert keda["owners"] == {"keda": ["keda"]}
    assert governance["owners"] == {"amazon-sagemaker-hyperpod-taskgovernance": ["taskGovernance"]}

    [off] = mcp_calls(cp, [("hyperpod_update_advanced_features", {"keda": {"enabled": False}})])
    assert mcp_wait(cp, off["operationId"])["status"] == "SUCCEEDED"
    final = state(cp)
    assert not final["keda"]["enabled"] and final["taskGovernance"]["enabled"]
