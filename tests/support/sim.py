"""Shared pieces of the simulator tests: a simulated cluster driven through its store, and sample specs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hyperpod_twin.clock import TwinClock
from hyperpod_twin.events import EventBus
from hyperpod_twin.kube.store import ObjectStore
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.nodes import NodeController

ARN = "arn:aws:eks:us-west-2:111122223333:cluster/sim-test"


@dataclass
class SimCluster:
    """One simulated cluster driven through its store, with twin time under the test's control."""

    sim: ClusterSim
    clock: TwinClock
    bus: EventBus

    @property
    def store(self) -> ObjectStore:
        return self.sim.runtime.store

    def add_node(
        self, instance_id: str, instance_type: str = "ml.g5.12xlarge", group: str = "gpu", **extra: Any
    ) -> None:
        """Publish a Running HyperPod instance to the node controller (as the plugin does)."""
        node = {
            "InstanceId": instance_id,
            "InstanceGroupName": group,
            "InstanceType": instance_type,
            "InstanceStatus": {"Status": extra.pop("status", "Running")},
            "Placement": {"AvailabilityZone": "us-west-2a", "AvailabilityZoneId": "usw2-az1"},
            **extra,
        }
        controller: NodeController = self.sim.controller(NodeController)
        self.sim.run(lambda: controller.instance_changed("hp-test", node))

    def create(self, group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create an object as an API client would (store write → controllers react)."""
        rtype = self.store.find_type(group, plural)
        assert rtype is not None, (group, plural)
        created: dict[str, Any] = self.store.create(rtype, obj)
        return created

    def get(self, group: str, plural: str, name: str, namespace: str = "default") -> dict[str, Any]:
        rtype = self.store.find_type(group, plural)
        assert rtype is not None
        obj: dict[str, Any] = self.store.get(rtype, namespace, name)
        return obj

    def list(self, group: str, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        rtype = self.store.find_type(group, plural)
        assert rtype is not None
        items, _ = self.store.list(rtype, namespace)
        result: list[dict[str, Any]] = items
        return result

    def advance(self, seconds: float, step: float = 0.5) -> None:
        """Move twin time on in small steps so chained timers (start → ready → exit) all fire."""
        remaining = seconds
        while remaining > 0:
            self.clock.advance(min(step, remaining))
            remaining -= step



def pod_spec(gpus: int = 0, **extra: Any) -> dict[str, Any]:
    """A one-container pod spec requesting `gpus` GPUs."""
    resources = {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}} if gpus else {}
    return {"containers": [{"name": "main", "image": "busybox:1.36", "resources": resources}], **extra}


def head_template(gpus: int = 0) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [
                {
                    "name": "ray-head",
                    "image": "rayproject/ray:2.46.0",
                    **({"resources": {"limits": {"nvidia.com/gpu": gpus}}} if gpus else {}),
                }
            ]
        }
    }


SERVE_CONFIG = """
applications:
- name: llm
  route_prefix: /
  import_path: ray.serve.llm:build_openai_app
  args:
    llm_configs:
    - model_loading_config: {model_id: qwen-0.5b, model_source: Qwen/Qwen2.5-0.5B-Instruct}
      accelerator_type: A10G
- name: fruit
  route_prefix: /fruit
  import_path: fruit.deployment_graph
  deployments: [{name: MangoStand}, {name: FruitMarket}]
"""


def hpjob(name: str, replicas: int, **run_policy: Any) -> dict[str, Any]:
    container = {
        "name": "pytorch-job-container",
        "image": "111122223333.dkr.ecr.us-west-2.amazonaws.com/train:1",
        "command": ["hyperpodrun", "train.py"],
        "resources": {"requests": {"nvidia.com/gpu": 4}, "limits": {"nvidia.com/gpu": 4}},
    }
    return {
        "apiVersion": "sagemaker.amazonaws.com/v1",
        "kind": "HyperPodPyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nprocPerNode": "auto",
            "replicaSpecs": [
                {
                    "name": "pod",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": {"twin.instantstart.io/run-seconds": "20"}},
                        "spec": {"containers": [container]},
                    },
                }
            ],
            "runPolicy": {"cleanPodPolicy": "None", **run_policy},
        },
    }


def pytorchjob(name: str, workers: int, **extra: Any) -> dict[str, Any]:
    def spec(replicas: int) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "restartPolicy": "OnFailure",
            "template": {
                "metadata": {"annotations": {"twin.instantstart.io/run-seconds": "10"}},
                "spec": {
                    "containers": [
                        {
                            "name": "pytorch",
                            "image": "pytorch/pytorch:2.5",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                },
            },
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default", **extra},
        "spec": {"nprocPerNode": "1", "pytorchReplicaSpecs": {"Master": spec(1), "Worker": spec(workers)}},
    }
