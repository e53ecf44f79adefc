"""Amazon SNS: publishing an alert notification to the operator's topic."""

from __future__ import annotations

import re
from typing import Any

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call

TOPIC_ARN = r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$"


def topic_region(topic_arn: str) -> str:
    """The Region of a topic ARN (SNS publishes in the topic's own Region)."""
    if not re.match(TOPIC_ARN, topic_arn):
        raise ValueError(f"not an SNS topic ARN: {topic_arn[:100]}")
    return topic_arn.split(":")[3]


def publish(aws: AwsClients, topic_arn: str, subject: str, message: str, attributes: dict[str, str]) -> str:
    """Publish `message` (with `subject`, cut to SNS's 100 characters, and string message attributes) to the
    topic; returns the MessageId. Failures are translated (retryable ones say so)."""
    client: Any = aws.client("sns", topic_region(topic_arn))
    answer = call(f"publish to SNS topic {topic_arn}", client.publish, TopicArn=topic_arn, Subject=subject[:100],
                  Message=message, MessageAttributes={k: {"DataType": "String", "StringValue": v}
                                                      for k, v in attributes.items()})
    return str(answer.get("MessageId", ""))


def topic_attributes(aws: AwsClients, topic_arn: str) -> dict[str, str]:
    """GetTopicAttributes: the topic exists and can be read (NotFound otherwise)."""
    client: Any = aws.client("sns", topic_region(topic_arn))
    answer = call(f"read SNS topic {topic_arn}", client.get_topic_attributes, TopicArn=topic_arn)
    return dict(answer.get("Attributes") or {})
