"""Twin plugin: runs a simulator on every twin EKS cluster and feeds it the AWS side's HyperPod events."""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hyperpod_twin.aws.protocol import AwsRequest, RawResponse
from hyperpod_twin.clock import TwinClock
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.sim import addons, crds, dcgm, fsx_mounts, governance_sync, jumpstart, nccl_tests
from hyperpod_twin.sim.core import ClusterSim, SimConfig
from hyperpod_twin.sim.hf_hub_http import HubServer
from hyperpod_twin.sim.kinds import CRDS
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.nodes import NodeController

if TYPE_CHECKING:
    from hyperpod_twin.events import EventBus

log = logging.getLogger(__name__)


def build_simulator(
    runtime: ClusterRuntime,
    clock: TwinClock,
    bus: EventBus | None = None,
    *,
    config: SimConfig | None = None,
    boto3_client: Callable[[str], Any] | None = None,
) -> ClusterSim:
    """A simulator with every controller, not yet started."""
    from hyperpod_twin.sim.controllers import all_controllers

    sim = ClusterSim(runtime, clock, bus, config or SimConfig())
    if boto3_client is not None:
        sim.extra["boto3_client"] = boto3_client
    for cls in all_controllers():
        sim.add(cls(sim))
    return sim


def install_crds(sim: ClusterSim, bundle: str) -> list[str]:
    """Create the CRDs of `bundle` that the cluster does not have yet; returns the names created."""
    from hyperpod_twin.kube.controllers import crd_resource_type

    created: list[str] = []
    for manifest in crds.crd_manifests(bundle):
        name = manifest["metadata"]["name"]
        if sim.get(CRDS, "", name) is None and sim.create(CRDS, manifest) is not None:
            created.append(name)
        rtype, _ = crd_resource_type(manifest)
        if sim.rtype(rtype.key) is None:  # no control plane registered it (store-only use)
            sim.store.register(rtype)
    return created


def remove_crds(sim: ClusterSim, bundle: str) -> list[str]:
    """Delete the CRDs of `bundle` (the control plane then drops their types and objects)."""
    removed = []
    for manifest in crds.crd_manifests(bundle):
        if sim.delete(CRDS, "", manifest["metadata"]["name"]):
            removed.append(manifest["metadata"]["name"])
    return removed


@dataclass
class SimPlugin:
    """The simulator side of one Twin: one ClusterSim per running EKS API server, keyed by cluster ARN."""

    clock: TwinClock
    bus: EventBus
    boto3_client: Callable[[str], Any] | None = None
    config: SimConfig = field(default_factory=SimConfig)
    sims: dict[str, ClusterSim] = field(default_factory=dict)
    # HyperPod events that arrived before the cluster's API server was up (replayed on start): per instance
    # the latest by sequence, a removal as node None (so an older change delivered later stays dropped).
    _pending_nodes: dict[str, dict[str, tuple[str, Obj | None, Obj | None, int | None]]] = field(
        default_factory=dict
    )
    _pending_bundles: dict[str, set[str]] = field(default_factory=dict)
    _pending_addons: dict[str, dict[str, tuple[str, str | None]]] = field(default_factory=dict)
    _clusters: dict[str, Obj] = field(default_factory=dict)  # eks arn → latest HyperPod DescribeCluster view
    # eks arn → the latest task governance (scheduler config, compute quotas) the AWS side published
    _governance: dict[str, tuple[Obj | None, list[Obj]]] = field(default_factory=dict)
    # FSx file system id → the AWS side's view (one account: every cluster's CSI node plugin sees the same).
    fsx_file_systems: dict[str, Obj] = field(default_factory=dict)
    # FSx file system id → its files (path → bytes): what pods of any cluster write through their Lustre mounts.
    fsx_contents: dict[str, dict[str, bytes]] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def subscribe(self) -> None:
        """Hook every topic the simulator reacts to."""
        self.bus.subscribe("kube.cluster.started", self.on_cluster_started)
        self.bus.subscribe("kube.cluster.stopped", self.on_cluster_stopped)
        self.bus.subscribe("eks.cluster.deleted", self.on_eks_deleted)
        self.bus.subscribe("hyperpod.node.changed", self.on_node_changed)
        self.bus.subscribe("hyperpod.node.removed", self.on_node_removed)
        self.bus.subscribe("hyperpod.node.health", self.on_node_health)
        self.bus.subscribe("hyperpod.cluster.deleted", self.on_hyperpod_deleted)
        self.bus.subscribe("hyperpod.cluster.changed", self.on_hyperpod_changed)
        self.bus.subscribe("hyperpod.autoscaling.active", self.on_autoscaling_active)
        self.bus.subscribe("eks.addon.active", self.on_addon_active)
        self.bus.subscribe("hyperpod.governance.changed", self.on_governance_changed)
        self.bus.subscribe("eks.addon.deleted", self.on_addon_deleted)
        self.bus.subscribe("fsx.filesystem.changed", self.on_fsx_changed)
        self.bus.subscribe("twin.reset", self.on_reset)
        self.bus.subscribe("twin.stopping", self.on_reset)

    # -- clusters -------------------------------------------------------------------------------
    def on_cluster_started(self, runtime: ClusterRuntime, **_: Any) -> None:
        """Start the controllers on a new API server's store and replay early HyperPod events."""
        with self._lock:
            old = self.sims.pop(runtime.arn, None)
            if old is not None:
                old.stop()
            sim = build_simulator(runtime, self.clock, self.bus, config=self.config, boto3_client=self.boto3_client)
            sim.extra[fsx_mounts.FILE_SYSTEMS] = self.fsx_file_systems
            sim.extra[fsx_mounts.CONTENTS] = self.fsx_contents
            self.sims[runtime.arn] = sim
            sim.start()
            for bundle in sorted(self._pending_bundles.pop(runtime.arn, set())):
                install_crds(sim, bundle)
            for addon, (version, namespace) in sorted(self._pending_addons.pop(runtime.arn, {}).items()):
                addons.install(sim, addon, version, namespace)
            cluster = self._clusters.get(runtime.arn)
            if cluster is not None:
                sim.extra["hyperpod_cluster"] = cluster
            if runtime.arn in self._governance:
                sim.extra[governance_sync.KEY] = self._governance[runtime.arn]
                sim.run(lambda: log.info("task governance: %s", governance_sync.sync(sim)))
            held = self._pending_nodes.pop(runtime.arn, {})
            for instance_id, (cluster_name, node, group, sequence) in held.items():
                if node is None:
                    self._node_controller(sim).instance_removed(instance_id, sequence)
                else:
                    self._node_controller(sim).instance_changed(cluster_name, node, group, sequence)
            sim.kick()

    def on_cluster_stopped(self, name: str = "", arn: str = "", **_: Any) -> None:
        """The API server went away: stop its simulator."""
        with self._lock:
            for key, sim in list(self.sims.items()):
                if key == arn or sim.runtime.name == name:
                    sim.stop()
                    del self.sims[key]

    def on_eks_deleted(self, name: str = "", arn: str = "", **_: Any) -> None:
        """EKS cluster deleted: same as its API server stopping."""
        self.on_cluster_stopped(name=name, arn=arn)
        with self._lock:
            self._pending_nodes.pop(arn, None)
            self._pending_bundles.pop(arn, None)
            self._pending_addons.pop(arn, None)

    def sim_for(self, eks_cluster_arn: str) -> ClusterSim | None:
        """The simulator of an EKS cluster, if its API server runs."""
        with self._lock:
            return self.sims.get(eks_cluster_arn)

    # -- HyperPod nodes -------------------------------------------------------------------------
    def on_node_changed(
        self,
        cluster_name: str,
        eks_cluster_arn: str,
        node: Obj,
        instance_group: Obj | None = None,
        sequence: int | None = None,
        **_: Any,
    ) -> None:
        """A HyperPod instance changed state (the node controller drops it if older than one applied)."""
        with self._lock:
            sim = self.sims.get(eks_cluster_arn)
            if sim is None:
                self._hold(eks_cluster_arn, node.get("InstanceId", ""), (cluster_name, node, instance_group, sequence))
                return
        sim.extra["hyperpod_cluster_name"] = cluster_name
        sim.run(lambda: self._node_controller(sim).instance_changed(cluster_name, node, instance_group, sequence))

    def on_node_removed(self, eks_cluster_arn: str, instance_id: str, sequence: int | None = None, **_: Any) -> None:
        """A HyperPod instance is gone."""
        with self._lock:
            sim = self.sims.get(eks_cluster_arn)
            if sim is None:
                self._hold(eks_cluster_arn, instance_id, ("", None, None, sequence))
                return
        sim.run(lambda: self._node_controller(sim).instance_removed(instance_id, sequence))

    def _hold(self, arn: str, instance_id: str, event: tuple[str, Obj | None, Obj | None, int | None]) -> None:
        """Keep an event for a cluster whose API server is not up yet, unless a newer one is kept."""
        held = self._pending_nodes.setdefault(arn, {})
        kept = held.get(instance_id)
        if kept is not None and kept[3] is not None and event[3] is not None and event[3] <= kept[3]:
            return
        held[instance_id] = event

    def on_node_health(
        self,
        eks_cluster_arn: str,
        instance_id: str,
        health_status: str = "",
        reason: str = "",
        deep_health_check_status: str | None = None,
        fault_type: str | None = None,
        **_: Any,
    ) -> None:
        """A health finding on a HyperPod instance: label + taint on its Node."""
        sim = self.sim_for(eks_cluster_arn)
        if sim is None or not health_status:
            return
        sim.run(
            lambda: self._node_controller(sim).health_finding(
                instance_id,
                health_status,
                deep_health_check_status=deep_health_check_status,
                fault_type=fault_type,
                fault_reason=reason or None,
            )
        )

    def on_hyperpod_deleted(self, eks_cluster_arn: str, **_: Any) -> None:
        """The HyperPod cluster is gone (its nodes were removed one by one already)."""
        with self._lock:
            self._pending_nodes.pop(eks_cluster_arn, None)
            self._clusters.pop(eks_cluster_arn, None)
            sim = self.sims.get(eks_cluster_arn)
        if sim is not None:
            sim.extra.pop("hyperpod_cluster", None)

    def on_hyperpod_changed(
        self, cluster_name: str, eks_cluster_arn: str, cluster: Obj, sequence: int | None = None, **_: Any
    ) -> None:
        """The HyperPod cluster's DescribeCluster view changed (groups, counts): Karpenter reads it. A view older
        than the one kept (by `sequence`, delivered late by another thread) is dropped."""
        with self._lock:
            if _older(sequence, self._clusters.get(eks_cluster_arn)):
                return
            self._clusters[eks_cluster_arn] = dict(cluster, **{_SEQUENCE: sequence})
            sim = self.sims.get(eks_cluster_arn)
        if sim is not None:
            sim.run(lambda: self._set_cluster(sim, cluster_name, cluster, sequence))

    @staticmethod
    def _set_cluster(sim: ClusterSim, cluster_name: str, cluster: Obj, sequence: int | None = None) -> None:
        from hyperpod_twin.sim.karpenter import ALL, KarpenterController

        if _older(sequence, sim.extra.get("hyperpod_cluster")):
            return
        sim.extra["hyperpod_cluster_name"] = cluster_name
        sim.extra["hyperpod_cluster"] = dict(cluster, **{_SEQUENCE: sequence})
        sim.enqueue(sim.controller(KarpenterController), ALL)

    # -- add-ons --------------------------------------------------------------------------------
    def on_addon_active(
        self, arn: str, addon_name: str, addon_version: str = "", namespace: str | None = None, **_: Any
    ) -> None:
        """An EKS add-on became ACTIVE: install its CRDs and its controller workloads (the operator
        itself then runs in the simulator)."""
        bundle = crds.ADDON_BUNDLES.get(addon_name)
        if bundle is not None:
            self._install(arn, bundle)
        with self._lock:
            sim = self.sims.get(arn)
            if sim is None:
                self._pending_addons.setdefault(arn, {})[addon_name] = (addon_version, namespace)
                return
        sim.run(
            lambda: log.info("add-on %s: %s", addon_name, addons.install(sim, addon_name, addon_version, namespace))
        )
        if bundle == "task-governance":
            sim.run(lambda: log.info("task governance: %s", governance_sync.sync(sim)))

    def on_governance_changed(
        self, eks_cluster_arn: str | None = None, scheduler: Obj | None = None, quotas: list[Obj] | None = None,
        **_: Any,
    ) -> None:
        """A scheduler config or compute quota changed: the task governance add-on syncs its Kueue objects."""
        if not eks_cluster_arn:
            return
        with self._lock:
            self._governance[eks_cluster_arn] = (scheduler, list(quotas or []))
            sim = self.sims.get(eks_cluster_arn)
        if sim is not None:
            sim.extra[governance_sync.KEY] = (scheduler, list(quotas or []))
            sim.run(lambda: log.info("task governance: %s", governance_sync.sync(sim)))

    def on_addon_deleted(self, cluster_arn: str, addon_name: str, preserve: bool = False, **_: Any) -> None:
        """An add-on was deleted: its workloads go; its CRDs (and custom resources) too unless preserved."""
        bundle = crds.ADDON_BUNDLES.get(addon_name)
        with self._lock:
            if bundle is not None:
                self._pending_bundles.get(cluster_arn, set()).discard(bundle)
            self._pending_addons.get(cluster_arn, {}).pop(addon_name, None)
            sim = self.sims.get(cluster_arn)
        if sim is None:
            return
        sim.run(lambda: addons.uninstall(sim, addon_name))
        if bundle is not None and not preserve:
            sim.run(lambda: log.info("removed CRDs %s", remove_crds(sim, bundle)))

    def on_autoscaling_active(self, eks_cluster_arn: str, **_: Any) -> None:
        """HyperPod Karpenter autoscaling reached InService: install NodePool/HyperpodNodeClass CRDs."""
        self._install(eks_cluster_arn, "karpenter")

    def _install(self, arn: str, bundle: str) -> None:
        with self._lock:
            sim = self.sims.get(arn)
            if sim is None:
                self._pending_bundles.setdefault(arn, set()).add(bundle)
                return
        sim.run(lambda: log.info("installed CRDs %s", install_crds(sim, bundle)))

    # -- reset ----------------------------------------------------------------------------------
    def on_fsx_changed(
        self, file_system_id: str = "", file_system: Obj | None = None, deleted: bool = False, **_: Any
    ) -> None:
        """An FSx file system was created, changed lifecycle or went: what the CSI node plugin mounts."""
        with self._lock:
            if deleted or file_system is None:
                self.fsx_file_systems.pop(file_system_id, None)
                self.fsx_contents.pop(file_system_id, None)
            else:
                self.fsx_file_systems[file_system_id] = file_system

    def on_reset(self, **_: Any) -> None:
        """Forget every cluster (the API servers are reset by their own plugin)."""
        with self._lock:
            for sim in self.sims.values():
                sim.stop()
            self.sims.clear()
            self._clusters.clear()
            self._governance.clear()
            self.fsx_file_systems.clear()
            self.fsx_contents.clear()
            self._pending_nodes.clear()
            self._pending_bundles.clear()
            self._pending_addons.clear()

    @staticmethod
    def _node_controller(sim: ClusterSim) -> NodeController:
        controller: NodeController = sim.controller(NodeController)
        return controller


_PLUGINS: weakref.WeakKeyDictionary[Any, SimPlugin] = weakref.WeakKeyDictionary()


def attach(twin: Any) -> None:
    """Twin plugin entry point: subscribe the simulator to the twin's bus."""
    plugin = SimPlugin(twin.clock, twin.bus, boto3_client=getattr(twin, "boto3_client", None))
    plugin.subscribe()
    nccl_tests.install(twin)  # /_twin/nodes/{i-…}/hardware: slow network, missing EFA, GPU fault
    _PLUGINS[twin] = plugin
    hub = HubServer(host=str(getattr(getattr(twin, "config", None), "host", "127.0.0.1")))
    hub.start()
    twin.hub_url = hub.url  # the Hugging Face hub stand-in's model API (serve --twin points hf_endpoint here)
    twin.bus.subscribe("twin.stopping", hub.stop)
    aws = getattr(twin, "aws", None)
    if aws is not None:  # SageMaker runtime InvokeEndpoint reaches the endpoints the inference operator registers
        account = str(twin.account_id)

        def invoke(req: AwsRequest) -> RawResponse:
            with plugin._lock:
                sims = list(plugin.sims.values())
            return jumpstart.invoke_endpoint(sims, req, account)

        aws.ctx.route("sagemaker-runtime", "InvokeEndpoint")(invoke)
        dcgm.install(twin, plugin.sim_for)  # AMP's query API over simulated DCGM metrics


def plugin_of(twin: Any) -> SimPlugin:
    """The simulator plugin attached to `twin` (tests use it to reach a cluster's simulator)."""
    return _PLUGINS[twin]


_SEQUENCE = "_sequence"  # key under which a kept DescribeCluster view records its event's sequence


def _older(sequence: int | None, kept: Obj | None) -> bool:
    """Whether an event numbered `sequence` is older than (or the same as) the one `kept` came from."""
    if sequence is None or not kept or kept.get(_SEQUENCE) is None:
        return False
    return sequence <= int(kept[_SEQUENCE])
