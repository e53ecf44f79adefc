"""The long chaos soak: the rule-based state machine of tests/support/soak.py, example after example, for a bounded
number of minutes; prints its figures (examples, steps, operations by kind, faults, kills, invariant checks,
violations) as it goes and at the end.

Run: PYTHONPATH=src .venv/bin/python bench/soak.py --minutes 60 [--steps 30] [--seed N] [--clusters 2] [--full]

Starts its own twin (clock scale 500: an EKS cluster is ACTIVE in about a second) and, per example, a fresh twin
account and a fresh control plane process on SQLite. Each example is one hypothesis run (its own seed, derived from
--seed); a violation is shrunk by hypothesis to a minimal sequence, which is saved as
tests/soak_regressions/<seed>.json (the suite replays every file there: tests/integration/test_soak.py), and
the run goes on with the next seed. Exits 1 when any violation was found. The time bound is checked between
examples: the last one may run past it by its own length (at most --steps steps and the settle at its end).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO)]

from hypothesis import HealthCheck, Phase, seed, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402
from tests.support.soak import bind, save_regression  # noqa: E402
from tests.support.soak_harness import STATS, Profile  # noqa: E402

from instantstart.twin_process import start_twin  # noqa: E402

MAX_MINUTES = 180.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help=f"how long (at most {MAX_MINUTES:.0f})")
    parser.add_argument("--steps", type=int, default=30, help="at most this many steps per example")
    parser.add_argument("--seed", type=int, default=None, help="master seed (default: random, printed)")
    parser.add_argument("--clusters", type=int, default=2, help="clusters alive at once")
    parser.add_argument("--kills", type=int, default=3, help="kill -9 per example at most")
    parser.add_argument("--full", action="store_true", help="whole cluster_create (HyperPod) among the creates")
    parser.add_argument("--no-shrink", action="store_true", help="report a violation without shrinking it")
    args = parser.parse_args()
    minutes = min(max(args.minutes, 0.1), MAX_MINUTES)
    master = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    rng = random.Random(master)
    STATS.verbose = True
    profile = Profile(max_clusters=args.clusters, full_create=args.full, max_kills=args.kills)
    print(f"soak: {minutes:g} min, master seed {master}, profile {profile}", flush=True)
    twin = start_twin(clock_scale=500.0)
    os.environ.update(twin.env)  # the soak's own ledger reconcile reads the twin with its credentials
    phases = [Phase.generate] if args.no_shrink else [Phase.generate, Phase.shrink]
    found: list[str] = []
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="soak-") as root:
            while time.monotonic() - started < minutes * 60:
                example_seed = rng.randrange(2**32)
                machine = seed(example_seed)(bind(twin, Path(root), profile))
                STATS.failures.clear()
                try:
                    # Hypothesis's first example is the simplest sequence (one rule repeated); the others are
                    # drawn from the seed, each with its own subset of the rules enabled (swarm testing).
                    run_state_machine_as_test(machine, settings=settings(
                        max_examples=4, stateful_step_count=args.steps, deadline=None, database=None,
                        phases=phases, suppress_health_check=list(HealthCheck), print_blob=False))
                except Exception as exc:  # a violation (shrunk) or an error of the harness: both are reported
                    parts = exc.exceptions if isinstance(exc, BaseExceptionGroup) else [exc]
                    message = " | ".join(f"{type(e).__name__}: {e}" for e in parts)
                    # The shortest sequence that failed as it ran (hypothesis's last replay may not have failed).
                    violation, steps = min(STATS.failures, key=lambda f: len(f[1]), default=(message, []))
                    saved = save_regression(steps, f"seed-{example_seed}", violation, profile)
                    found.append(message)
                    print(f"VIOLATION (seed {example_seed}, {len(steps)} steps, saved {saved}):\n"
                          f"  {message[:1500]}", flush=True)
                elapsed = (time.monotonic() - started) / 60
                print(f"[{elapsed:5.1f} min] seed {example_seed}: {STATS.line()}", flush=True)
    finally:
        twin.stop()
    print(f"soak done in {(time.monotonic() - started) / 60:.1f} min (master seed {master}): {STATS.line()}; "
          f"failed examples {len(found)}", flush=True)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
