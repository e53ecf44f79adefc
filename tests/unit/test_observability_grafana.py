"""The observability feature's Grafana options and links, without AWS: which options go together, the link falls
back to the console unless the workspace is ACTIVE, and the Grafana role's trust and query policy."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from instantstart.manifests.iam_feature_policies import grafana_query_policy, grafana_trust
from instantstart.services.base.observability import summary
from instantstart.services.features.orchestrate import ObservabilityToggle
from instantstart.services.monitoring.gpu import links

AMP = {"workspaceId": "ws-1", "arn": "arn:aws:aps:us-west-2:111122223333:workspace/ws-1",
       "prometheusEndpoint": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1/"}
AMP_ARN = str(AMP["arn"])


@pytest.mark.parametrize("body", [
    {"enabled": True, "grafanaWorkspaceId": "g-0123456789", "grafana": True},
    {"enabled": True, "grafanaWorkspaceId": "g-0123456789", "grafana": False},
    {"enabled": False, "grafana": True},
    {"enabled": False, "grafanaWorkspaceId": "g-0123456789"},
    {"enabled": True, "grafanaWorkspaceId": "g-01234"},
    {"enabled": True, "grafanaWorkspaceId": "G-0123456789"},
])
def test_conflicting_or_malformed_grafana_options_are_refused(body: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="grafana"):
        ObservabilityToggle.model_validate(body)


def test_valid_grafana_options() -> None:
    assert ObservabilityToggle.model_validate({"enabled": True, "grafana": True}).grafana is True
    adopt = ObservabilityToggle.model_validate({"enabled": True, "grafanaWorkspaceId": "g-0123456789"})
    assert adopt.model_dump(by_alias=True, exclude_none=True) == {
        "enabled": True, "logging": False, "grafanaWorkspaceId": "g-0123456789"}
    assert ObservabilityToggle.model_validate({"enabled": False, "grafana": False}).grafana is False


def test_grafana_link_is_the_active_workspace_else_the_console() -> None:
    console = "https://us-west-2.console.aws.amazon.com/grafana/home?region=us-west-2#/workspaces"
    none = links("us-west-2", AMP, None)
    assert none.grafana_url == console and none.grafana_workspace_url is None and none.grafana_workspace_id is None
    ws = {"id": "g-0123456789", "endpoint": "g-0123456789.grafana-workspace.us-west-2.amazonaws.com",
          "status": "ACTIVE", "name": "instantstart-t"}
    active = links("us-west-2", AMP, None, summary(ws, True))
    url = "https://g-0123456789.grafana-workspace.us-west-2.amazonaws.com"
    assert active.grafana_workspace_url == url == active.grafana_url
    assert active.grafana_workspace_id == "g-0123456789" and active.grafana_console_url == console
    creating = links("us-west-2", AMP, None, summary({**ws, "status": "CREATING"}, True))
    assert creating.grafana_workspace_url is None and creating.grafana_url == console
    assert creating.grafana_workspace_id == "g-0123456789"
    off = links("us-west-2", None, "off", summary(ws, True))
    assert not off.enabled and off.grafana_url is None


def test_grafana_role_reads_only_this_amp_workspace() -> None:
    trust = grafana_trust(AMP_ARN)["Statement"][0]
    assert trust["Principal"] == {"Service": "grafana.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": "111122223333"},
                                  "ArnLike": {"aws:SourceArn": "arn:aws:grafana:us-west-2:111122223333:/workspaces/*"}}
    *allowed, guard = grafana_query_policy(AMP_ARN)["Statement"]
    promql, listing = allowed
    assert guard["Effect"] == "Deny" and guard["Resource"] == ["arn:aws:s3:::*/lifecycle/*"]
    assert promql["Resource"] == [AMP_ARN] and "aps:QueryMetrics" in promql["Action"]
    assert "aps:RemoteWrite" not in promql["Action"] + listing["Action"]
