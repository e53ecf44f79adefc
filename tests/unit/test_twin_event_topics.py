"""The twin's event bus takes only the topics it names (hyperpod_twin.events.Topic), each documented."""

from __future__ import annotations

import re
from typing import Any

import pytest

from hyperpod_twin.events import TOPICS, EventBus


def test_a_misspelt_topic_is_refused_on_subscribe_and_publish() -> None:
    bus = EventBus()
    topic: Any = "twin.rest"  # a topic built at run time escapes mypy's Literal check
    with pytest.raises(ValueError, match=r"unknown twin event topic 'twin\.rest'.*twin\.reset"):
        bus.subscribe(topic, lambda **_: None)
    with pytest.raises(ValueError, match=r"unknown twin event topic 'twin\.rest'"):
        bus.publish(topic)


def test_a_known_topic_reaches_its_handlers() -> None:
    bus = EventBus()
    seen: list[dict[str, Any]] = []
    bus.subscribe("kube.cluster.stopped", lambda **kw: seen.append(kw))
    assert bus.publish("kube.cluster.stopped", name="c1") == [None]
    assert seen == [{"name": "c1"}]


def test_every_topic_is_documented_with_its_payload() -> None:
    documented = set(re.findall(r"^\s*- ``([a-z_.]+)``", EventBus.__doc__ or "", re.M))
    assert documented == set(TOPICS)
