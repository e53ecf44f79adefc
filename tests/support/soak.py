"""The chaos soak: a hypothesis rule-based state machine that drives mutating operations over REST and MCP
against a control plane process on the twin, injects twin faults (throttling, 5xx, capacity, add-on, EKS and NAT
failures, watch cuts, API server blocks) and kill -9 of the control plane, and checks invariants after every
step (tests/support/soak_checks.py). Each rule's name and arguments are logged, so a shrunk failing sequence can
be saved as JSON and replayed (`replay`): tests/soak_regressions/ holds them, tests/integration/test_soak.py
replays every file there.

`bench/soak.py` runs it for minutes; tests/integration/test_soak.py runs a short, derandomized version."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from instantstart.twin_process import TwinProcess
from tests.support.soak_checks import check_quiet, check_step, wait_quiet
from tests.support.soak_harness import ACTIVE, STATS, Harness, Profile

REGRESSIONS = Path(__file__).resolve().parents[1] / "soak_regressions"
FACES = st.sampled_from(["rest", "mcp"])
SERVICES = ("ec2", "eks", "iam", "sagemaker", "sts")
FAULTS = ("throttle", "server_error", "insufficient_capacity", "addon_failure", "eks_failure",
          "nat_gateway_failure", "nat_gateway_slow")
PROBES = {
    "plain": {},
    "transient": {"beta": {"temporaryFailures": 2}},  # retried within its attempts: SUCCEEDED
    "refused": {"gamma": {"failIfFileExists": "{journal}"}},  # a precondition failure: FAILED with a hint
}


def fault_spec(kind: str, service: str, count: int) -> dict[str, Any]:
    """The twin's fault spec (src/hyperpod_twin/aws/faults.py) for one random fault."""
    if kind in ("throttle", "server_error"):
        return {"kind": kind, "service": service, "operation": "*", "count": count}
    if kind == "insufficient_capacity":
        return {"kind": kind, "instance_type": "ml.g6.4xlarge", "count": count}
    if kind == "addon_failure":
        return {"kind": kind, "outcome": "CREATE_FAILED", "count": count}
    if kind == "nat_gateway_slow":
        return {"kind": kind, "seconds": 900, "count": count}
    return {"kind": kind, "count": count}


class SoakMachine(RuleBasedStateMachine):
    """One example: a fresh twin account and control plane, then random steps. Subclass it with `bind`."""

    twin: ClassVar[TwinProcess]
    root: ClassVar[Path]
    profile: ClassVar[Profile]
    last_steps: ClassVar[list[dict[str, Any]]] = []

    def __init__(self) -> None:
        super().__init__()
        STATS.examples += 1
        self.h = Harness(self.twin, self.root, self.profile)
        self.steps: list[dict[str, Any]] = self.h.steps
        type(self).last_steps = self.steps
        self.kills = 0

    def log(self, rule_name: str, **args: Any) -> None:
        self.steps.append({"rule": rule_name, "args": args})
        STATS.steps += 1

    def live(self) -> list[str]:
        return [t for t, r in self.h.clusters.items() if not r.get("delete")]

    def pick(self, items: list[str], index: int) -> str | None:
        return sorted(items)[index % len(items)] if items else None

    # -- operations ----------------------------------------------------------------------------------------------

    @precondition(lambda self: len(self.live()) < self.profile.max_clusters)
    @rule(face=FACES, full=st.booleans(), resend=st.booleans())
    def create_cluster(self, face: str, full: bool, resend: bool) -> None:
        """cluster_create_eks (or, in a profile that allows it, the whole cluster_create); `resend` sends the same
        request again with the same idempotency key through the other face."""
        self.log("create_cluster", face=face, full=full, resend=resend)
        full = full and self.profile.full_create
        self.h.serial += 1
        tag = f"soak{self.h.serial}"
        key = self.h.new_key()
        if full:
            call = ("cluster_create", "POST", "/clusters",
                    {"clusterTag": tag, "instanceType": "ml.g6.4xlarge", "instanceCount": 1,
                     "availabilityZone": "us-west-2c"})
        else:
            call = ("cluster_create_eks", "POST", "/clusters/eks", {"clusterTag": tag})
        operation_id = self.h.submit(call[0], face, *call, key)
        if operation_id:
            self.h.clusters[tag] = {"create": operation_id, "delete": None}
        if resend:
            other = "rest" if face == "mcp" else "mcp"
            again = self.h.submit(call[0], other, *call, key)
            if operation_id and again and again != operation_id:
                self.h.fail(f"the same idempotency key gave {operation_id} and then {again}")

    @rule(face=FACES, index=st.integers(0, 7))
    def delete_cluster(self, face: str, index: int) -> None:
        """cluster_delete_plan then cluster_delete with its digest, for a cluster whose creation ended."""
        self.log("delete_cluster", face=face, index=index)
        ended = [t for t, r in self.h.clusters.items()
                 if not r.get("delete") and self.h.view(str(r["create"]))["status"] not in ACTIVE]
        tag = self.pick(ended, index)
        if tag is None:
            return
        if face == "mcp":
            status, plan = self.h.mcp("cluster_delete_plan", {"clusterTag": tag})
        else:
            status, plan = self.h.rest("GET", f"/clusters/{tag}/deletion-plan")
        if status >= 400:
            return
        body = {"clusterTag": tag, "planDigest": plan["planDigest"]}
        operation_id = self.h.submit("cluster_delete", face, "cluster_delete", "POST", "/clusters/{clusterTag}/delete",
                                     body, self.h.new_key())
        if operation_id:
            self.h.clusters[tag]["delete"] = operation_id

    @rule(face=FACES, behaviour=st.sampled_from(sorted(PROBES)), resend=st.booleans())
    def probe(self, face: str, behaviour: str, resend: bool) -> None:
        """The test plugin's four-stage operation: cheap, and every stage outcome the runner knows."""
        self.log("probe", face=face, behaviour=behaviour, resend=resend)
        self.h.serial += 1
        journal = self.h.dir / "journal" / str(self.h.serial)
        spec = json.loads(json.dumps(PROBES[behaviour]).replace("{journal}", str(journal)))
        body = {"journalDir": str(journal), "target": f"probe{self.h.serial}", "stageSeconds": 0.05,
                "behaviour": spec}
        key = self.h.new_key()
        first = self.h.submit("probe", face, "probe_run", "POST", "/test/probe", body, key)
        if resend:
            again = self.h.submit("probe", "rest" if face == "mcp" else "mcp", "probe_run", "POST", "/test/probe",
                                  body, key)
            if first and again and first != again:
                self.h.fail(f"the same idempotency key gave {first} and then {again}")

    @rule(face=FACES, retry=st.booleans(), index=st.integers(0, 7))
    def cancel_or_retry(self, face: str, retry: bool, index: int) -> None:
        """operation_cancel on an active operation, or operation_retry on a failed or cancelled one: either
        answers with the same operation, never a new one."""
        self.log("cancel_or_retry", face=face, retry=retry, index=index)
        wanted = ("FAILED", "CANCELLED") if retry else ACTIVE
        ids = [v["operationId"] for v in self.h.operations() if v["status"] in wanted]
        operation_id = self.pick(ids, index)
        if operation_id is None:
            return
        tool, verb = ("operation_retry", "retry") if retry else ("operation_cancel", "cancel")
        if face == "mcp":
            status, ref = self.h.mcp(tool, {"operationId": operation_id})
        else:
            status, ref = self.h.rest("POST", f"/operations/{operation_id}/{verb}")
        if status < 400 and ref.get("operationId") != operation_id:
            self.h.fail(f"{tool} of {operation_id} answered with {ref.get('operationId')}")

    @rule(face=FACES)
    def alert_channels(self, face: str) -> None:
        """alert_channels_update with a new webhook secret, which must never appear in an answer or a log."""
        self.log("alert_channels", face=face)
        secret = secrets.token_hex(16)
        self.h.secrets.add(secret)
        body = {"webhookUrl": "https://hooks.example.com/soak", "webhookSecret": secret}
        self.h.submit("alert_channels_update", face, "alert_channels_update", "POST", "/alerts/channels", body,
                      self.h.new_key())

    # -- chaos ---------------------------------------------------------------------------------------------------

    @rule(kind=st.sampled_from(FAULTS), service=st.sampled_from(SERVICES), count=st.integers(1, 3))
    def fault(self, kind: str, service: str, count: int) -> None:
        """One scripted AWS fault in the twin, used up after `count` hits (or cleared by `heal`)."""
        self.log("fault", kind=kind, service=service, count=count)
        self.h.twin_post("/_twin/faults", fault_spec(kind, service, count)).raise_for_status()
        STATS.faults += 1

    @rule(block=st.booleans(), index=st.integers(0, 7))
    def kube_chaos(self, block: bool, index: int) -> None:
        """Cut every watch of a cluster's Kubernetes API server, or block the whole API (503) until `heal`."""
        self.log("kube_chaos", block=block, index=index)
        names = [f"eks-cluster-{t}" for t in self.h.clusters]
        name = self.pick(names, index)
        if name is None:
            return
        action = "api/block" if block else "watches/cut"
        response = self.h.twin_post(f"/_twin/kube/{name}/{action}", {"blocked": True} if block else {})
        if response.status_code == 200:
            STATS.faults += 1
            if block:
                self.h.blocked.add(name)

    @rule()
    def heal(self) -> None:
        self.log("heal")
        self.h.heal()

    @precondition(lambda self: self.kills < self.profile.max_kills)
    @rule()
    def kill_9(self) -> None:
        """SIGKILL the control plane wherever its operations are, and start it again on the same database."""
        self.log("kill_9")
        self.kills += 1
        STATS.kills += 1
        self.h.kill_and_restart()

    @rule()
    def settle(self) -> None:
        """Faults healed, every operation ended: the ledger and status checks of a quiet point."""
        self.log("settle")
        self.h.heal()
        wait_quiet(self.h)
        check_quiet(self.h)

    @invariant()
    def every_step(self) -> None:
        check_step(self.h)

    def teardown(self) -> None:
        try:
            self.h.heal()
            wait_quiet(self.h)
            check_step(self.h)
            check_quiet(self.h)
        finally:
            self.h.close()


def bind(twin: TwinProcess, root: Path, profile: Profile) -> type[SoakMachine]:
    """The machine class for this twin, scratch directory and profile."""
    return type("Soak", (SoakMachine,), {"twin": twin, "root": root, "profile": profile})


def replay(machine: type[SoakMachine], steps: list[dict[str, Any]]) -> None:
    """Run a saved sequence (tests/soak_regressions/*.json) step by step, the invariants after each."""
    instance = machine()
    try:
        instance.every_step()
        for step in steps:
            getattr(instance, step["rule"])(**step["args"])
            instance.every_step()
    finally:
        instance.teardown()


def save_regression(steps: list[dict[str, Any]], name: str, violation: str, profile: Profile) -> Path:
    """Write a failing (shrunk) sequence where the suite replays it."""
    REGRESSIONS.mkdir(exist_ok=True)
    path = REGRESSIONS / f"{name}.json"
    document = {"violation": violation[:2000], "profile": profile.__dict__, "steps": steps}
    path.write_text(json.dumps(document, indent=1) + "\n")
    return path
