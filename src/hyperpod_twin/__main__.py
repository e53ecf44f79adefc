"""`python -m hyperpod_twin`: run the digital twin on a port and print how to point boto3 at it."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import signal
import threading
from pathlib import Path

from hyperpod_twin.aws.caller_policy import OperatorSetup
from hyperpod_twin.twin import DEFAULT_CLOCK_SCALE, Twin, TwinConfig

# Generation-0 collections once per 50,000 net allocations instead of 700: the twin allocates briskly (each AWS
# request, each simulated Kubernetes object) and few of those objects form cycles, so the default threshold spent
# CPU on collections that found little.
GC_THRESHOLDS = (50_000, 10, 10)


def _quiet_collector(twin: Twin) -> None:
    """Once the models are parsed, move everything alive out of the collector's reach and space collections out
    (a served twin only: tests that embed a Twin keep Python's defaults)."""
    if twin.preloading is not None:
        twin.preloading.join()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def main(argv: list[str] | None = None) -> int:
    """Start a twin and serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m hyperpod_twin", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5000, help="port (0 picks a free one; default 5000)")
    parser.add_argument(
        "--clock-scale",
        type=float,
        default=DEFAULT_CLOCK_SCALE,
        help=f"twin seconds per real second (default {DEFAULT_CLOCK_SCALE:g})",
    )
    parser.add_argument("--account-id", default=TwinConfig.account_id, help="the twin account (default %(default)s)")
    parser.add_argument("--region", default=TwinConfig.region, help="the default Region (default %(default)s)")
    parser.add_argument("--log-level", default="WARNING", help="Python log level (default %(default)s)")
    parser.add_argument("--caller-policy", type=Path, help="a JSON IAM policy given to the twin's caller: the "
                        "control plane's guarded calls are then judged by it")
    parser.add_argument("--account-policy", action="append", default=[], metavar="NAME=FILE",
                        help="a customer managed policy the account holds (e.g. the permissions boundary)")
    args = parser.parse_args(argv)
    setup = OperatorSetup(
        caller_policy=json.loads(args.caller_policy.read_text()) if args.caller_policy else None,
        account_policies={name: json.loads(Path(path).read_text())
                          for name, _, path in (item.partition("=") for item in args.account_policy)},
    )
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    twin = Twin(
        TwinConfig(
            host=args.host, port=args.port, clock_scale=args.clock_scale, account_id=args.account_id,
            region=args.region, setup=setup,
        )
    ).start()
    threading.Thread(target=_quiet_collector, args=(twin,), name="twin-gc", daemon=True).start()
    lines = [
        f"hyperpod_twin: AWS account {twin.account_id} in {twin.region} at {twin.endpoint_url}",
        f"  twin clock: {twin.clock.scale:g} twin seconds per second; control at {twin.endpoint_url}/_twin/health",
        "",
        "Point boto3 (or the AWS CLI) at it:",
    ]
    lines += [f"  export {k}={v}" for k, v in twin.env().items()]
    lines += [
        "",
        "or in Python:",
        f"  boto3.client('sagemaker', endpoint_url='{twin.endpoint_url}', region_name='{twin.region}',",
        f"               aws_access_key_id='{twin.access_key_id}', aws_secret_access_key='{twin.secret_access_key}')",
        f"Project bucket: s3://{twin.project_bucket}",
    ]
    print("\n".join(lines), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        twin.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
