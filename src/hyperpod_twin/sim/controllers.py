"""The list of controllers every simulated cluster runs, in the order they hear each change."""

from __future__ import annotations

from hyperpod_twin.sim.certmanager import CertManager
from hyperpod_twin.sim.collector import ObservabilityCollector
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.inference import InferenceOperator
from hyperpod_twin.sim.jobs import JobController
from hyperpod_twin.sim.jumpstart import JumpStartOperator
from hyperpod_twin.sim.karpenter import KarpenterController
from hyperpod_twin.sim.keda import KedaOperator
from hyperpod_twin.sim.kubelet import Kubelet
from hyperpod_twin.sim.kueue import KueueController
from hyperpod_twin.sim.load_balancers import LoadBalancerController
from hyperpod_twin.sim.metrics import MetricsServer
from hyperpod_twin.sim.model_download import ModelDownloadContainer
from hyperpod_twin.sim.mpijob import MPIJobController
from hyperpod_twin.sim.nodes import NodeController
from hyperpod_twin.sim.pytorchjob import PyTorchJobController
from hyperpod_twin.sim.ray import RayClusterController, RayJobController
from hyperpod_twin.sim.rayservice import RayServiceController
from hyperpod_twin.sim.s3_mounts import S3MountWriter
from hyperpod_twin.sim.scheduler import Scheduler
from hyperpod_twin.sim.services import EndpointsController
from hyperpod_twin.sim.sets import DaemonSetController
from hyperpod_twin.sim.statefulsets import StatefulSetController
from hyperpod_twin.sim.training import TrainingOperator
from hyperpod_twin.sim.volumes import VolumeBinder
from hyperpod_twin.sim.workloads import DeploymentController, ReplicaSetController


def all_controllers() -> list[type[Controller]]:
    """Controller classes, each constructed with the ClusterSim."""
    return [
        NodeController,
        DeploymentController,
        ReplicaSetController,
        JobController,
        DaemonSetController,
        StatefulSetController,
        VolumeBinder,
        KueueController,
        TrainingOperator,
        PyTorchJobController,
        MPIJobController,
        InferenceOperator,
        JumpStartOperator,
        RayClusterController,
        RayJobController,
        RayServiceController,
        KedaOperator,
        CertManager,
        Scheduler,
        KarpenterController,
        MetricsServer,
        Kubelet,
        S3MountWriter,
        ModelDownloadContainer,
        ObservabilityCollector,
        EndpointsController,
        LoadBalancerController,
    ]


__all__ = ["ClusterSim", "all_controllers"]
