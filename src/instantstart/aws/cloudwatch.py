"""Amazon CloudWatch alarms: the state of the alarms a rolling software update watches (blocking)."""

from __future__ import annotations

from typing import Any

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call


def alarm_states(aws: AwsClients, region: str, names: list[str]) -> dict[str, dict[str, Any]]:
    """DescribeAlarms of the named metric and composite alarms: name -> {state, reason, updated}; an alarm that
    does not exist is absent from the answer."""
    if not names:
        return {}
    client: Any = aws.client("cloudwatch", region)
    answer = call("describe CloudWatch alarms", client.describe_alarms, AlarmNames=names,
                  AlarmTypes=["MetricAlarm", "CompositeAlarm"])
    found: dict[str, dict[str, Any]] = {}
    for alarm in list(answer.get("MetricAlarms") or []) + list(answer.get("CompositeAlarms") or []):
        updated = alarm.get("StateUpdatedTimestamp")
        found[str(alarm["AlarmName"])] = {
            "state": alarm.get("StateValue"),
            "reason": alarm.get("StateReason"),
            "updated": updated.isoformat() if hasattr(updated, "isoformat") else updated,
        }
    return found
