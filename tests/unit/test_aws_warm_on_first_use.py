"""`serve` holds no AWS client while idle; the first one asked for builds the rest of a creation's in the background."""

from __future__ import annotations

import threading

from instantstart.aws.clients import WARM_SERVICES, AwsClients
from instantstart.settings import Settings


def warm_thread() -> threading.Thread | None:
    return next((t for t in threading.enumerate() if t.name == "aws-warm"), None)


def test_an_idle_server_holds_no_client_and_the_first_use_warms_the_others() -> None:
    aws = AwsClients(Settings(aws_region="us-west-2", aws_endpoint_url="http://127.0.0.1:9"))
    aws.warm_on_first_use()
    assert aws._clients == {} and warm_thread() is None
    sts = aws.sts()
    thread = warm_thread()
    assert thread is not None
    thread.join(timeout=120)
    assert set(aws._clients) == {(service, "us-west-2") for service in WARM_SERVICES}
    assert aws.sts() is sts  # the client the request built is kept, not rebuilt by the warm-up
    aws.iam()
    assert warm_thread() is None  # warmed once


def test_clients_built_before_are_not_warmed_again() -> None:
    aws = AwsClients(Settings(aws_region="us-west-2", aws_endpoint_url="http://127.0.0.1:9"))
    aws.s3()
    aws.warm_on_first_use()
    aws.eks()
    assert warm_thread() is None and set(aws._clients) == {("s3", "us-west-2"), ("eks", "us-west-2")}


def test_warming_in_background_happens_once_whatever_starts_it() -> None:
    aws = AwsClients(Settings(aws_region="us-west-2", aws_endpoint_url="http://127.0.0.1:9"))
    aws.warm_on_first_use()
    aws.warm_in_background()
    thread = warm_thread()
    assert thread is not None
    thread.join(timeout=120)
    aws.warm_in_background()
    aws.ec2()
    assert warm_thread() is None
    assert set(aws._clients) == {(service, "us-west-2") for service in WARM_SERVICES}
