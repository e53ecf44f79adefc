"""Adaptive polling: checks follow the wait (at most ~2 % late at any length), never tighter than the floor."""

from __future__ import annotations

from instantstart.operations.waiting import next_poll


def overshoot(wait: float, poll: float) -> tuple[float, int]:
    """When a wait of `wait` seconds is first seen done, and after how many checks."""
    t, checks = 0.0, 1
    while t < wait:
        t += next_poll(t, poll)
        checks += 1
    return t - wait, checks


def test_a_check_lands_soon_after_the_wait_ends_whatever_its_length() -> None:
    for wait in (0.07, 1.5, 12.0, 15.0, 60.0, 120.0, 300.0):
        late, _ = overshoot(wait, 10.0)
        assert late <= max(0.02 * wait, 0.2) + 1e-9, (wait, late)
    # A wait that ends almost at once is seen within the first short sleeps.
    assert overshoot(0.07, 10.0)[0] <= 0.05 + 1e-9
    # Long waits: the configured interval caps the spacing (and the number of calls).
    late, checks = overshoot(1200.0, 10.0)
    assert late <= 10.0 and checks < 1200 / 10 + 220


def test_the_checks_a_wait_costs_stay_bounded() -> None:
    # An EKS control plane on AWS (~10 minutes): about 260 DescribeCluster calls, one per 2.3 s on average.
    _, checks = overshoot(600.0, 10.0)
    assert checks <= 270, checks
    # The same wait on the twin at clock scale 40 (15 s): about five checks a second.
    _, checks = overshoot(15.0, 10.0)
    assert checks <= 80, checks


def test_the_spacing_grows_with_the_time_waited() -> None:
    assert next_poll(8.0, 10.0) == 0.2  # the floor until 2 % of the elapsed time exceeds it
    assert abs(next_poll(100.0, 10.0) - 2.0) < 1e-9
    assert next_poll(600.0, 10.0) == 10.0  # the configured interval from ~8 minutes on


def test_the_schedule_starts_short_doubles_to_the_floor_and_never_exceeds_the_interval() -> None:
    assert next_poll(0.0, 10.0) == 0.05
    assert next_poll(0.05, 10.0) == 0.05
    assert next_poll(0.1, 10.0) == 0.1
    assert next_poll(0.2, 10.0) == 0.2
    assert next_poll(1000.0, 10.0) == 10.0
    assert next_poll(5.0, 0.1) == 0.1  # a configured interval shorter than the floor wins
