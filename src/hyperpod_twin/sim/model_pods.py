"""Model-server pods: the HTTP handlers a Ready pod answers with, its startup lines, API key and local model check."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from hyperpod_twin.kube.runtime import ProxyHandler
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.model_router import RouterHandler
from hyperpod_twin.sim.model_server import ModelServer, command_words, flag_value, kind_of, model_id, ports_of

if TYPE_CHECKING:
    from hyperpod_twin.sim.core import ClusterSim


def local_model_problem(sim: ClusterSim, pod: Obj) -> str | None:
    """Why a vLLM/SGLang container cannot load its model from an FSx mount (the path holds no model: no
    config.json), as the server's startup error; None when it can or the model is not on an FSx mount."""
    from hyperpod_twin.sim import fsx_mounts

    for container in (pod.get("spec") or {}).get("containers") or []:
        if kind_of(container) not in ("vllm", "sglang"):
            continue
        words = command_words(container)
        path = flag_value(words, "--model", "--model-path")
        if path is None and "serve" in words and words.index("serve") + 1 < len(words):
            path = words[words.index("serve") + 1]
        if not path or not path.startswith("/"):
            continue
        lustre = fsx_mounts.resolve(sim, pod, container, path.rstrip("/"))
        if lustre is not None and f"{lustre.path}/config.json" not in lustre.files:
            return f"OSError: Can't load the configuration of '{path}': no config.json in that local directory"
    return None


def startup_lines(pod: Obj, container: Obj) -> list[str]:
    """What the server prints when it starts (so `kubectl logs` looks like a model server)."""
    kind = kind_of(container)
    if kind is None:
        return []
    port = ports_of(container, kind)[0]
    if kind == "router":
        return [f"[twin] sglang router (simulated) listening on 0.0.0.0:{port}"]
    return [
        f"[twin] simulated {kind} server: model {model_id(container)} (no weights are loaded)",
        f"INFO:     Uvicorn running on http://0.0.0.0:{port} (Press CTRL+C to quit)",
    ]


def api_key(sim: ClusterSim, ns: str, container: Obj) -> str | None:
    """The server's --api-key, with a `$(VAR)` reference expanded from the container's env (a secretKeyRef read
    from the namespace's Secret), as the kubelet expands it in command and args."""
    from hyperpod_twin.sim.model_download import env_of

    value = flag_value(command_words(container), "--api-key")
    if value is None:
        return None
    ref = re.fullmatch(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", value)
    return env_of(sim, ns, container).get(ref.group(1), value) if ref else value


def register(sim: ClusterSim, pod: Obj) -> None:
    """Make a Ready model-server pod answer HTTP on its ports through runtime.pod_http."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    for container in pod.get("spec", {}).get("containers") or []:
        kind = kind_of(container)
        if kind is None:
            continue
        handler: ProxyHandler
        if kind == "router":
            handler = RouterHandler(sim, ns, container)
        else:
            handler = ModelServer(
                kind,
                model_id(container),
                sim.clock.wall,
                functools.partial(sim.runtime.logs.append, ns, name, container["name"]),
                api_key(sim, ns, container),
            )
        for port in ports_of(container, kind):
            sim.runtime.pod_http.register(ns, name, port, handler)
