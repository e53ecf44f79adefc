"""Simulated vLLM / SGLang servers and the SGLang router: OpenAI-shaped answers that say they are simulated."""

from __future__ import annotations

import functools
import itertools
import json
import re
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from hyperpod_twin.kube.runtime import ProxyHandler, ProxyResponse
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.kobj import Obj

if TYPE_CHECKING:
    from hyperpod_twin.sim.core import ClusterSim

SIMULATED = "[twin simulated response]"
_DEFAULT_PORTS = {"vllm": 8000, "sglang": 30000, "router": 30000}
GENERATION_ROUTES = ("/v1/chat/completions", "/v1/completions", "/invocations", "/generate")


def _words(container: Obj) -> list[str]:
    return [str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])]]


def kind_of(container: Obj) -> str | None:
    """ "router", "vllm", "sglang" or None, from the container's image and command line."""
    image = str(container.get("image", "")).lower()
    words = " ".join(_words(container)).lower()
    if "sglang_router" in words or "sglang-router" in image or "sglang_router" in image:
        return "router"
    if "djl-inference" in image and "lmi" in image:
        return "vllm"  # an LMI container (JumpStart) on its vLLM rolling-batch backend
    for kind in ("vllm", "sglang"):
        if kind in image or kind in words:
            return kind
    return None


def _arg(words: list[str], *names: str) -> str | None:
    for i, word in enumerate(words):
        for name in names:
            if word == name and i + 1 < len(words):
                return words[i + 1]
            if word.startswith(name + "="):
                return word.split("=", 1)[1]
    return None


def model_id(container: Obj) -> str:
    """The served model name: --served-model-name, else --model / --model-path, else `vllm serve X`."""
    words = _words(container)
    served = _arg(words, "--served-model-name")
    if served:
        return served
    model = _arg(words, "--model", "--model-path")
    if model:
        return model
    if "serve" in words:
        idx = words.index("serve")
        if idx + 1 < len(words) and not words[idx + 1].startswith("-"):
            return words[idx + 1]
    env = {e.get("name"): e.get("value") for e in container.get("env") or []}
    return str(env.get("MODEL_ID") or env.get("MODEL_NAME") or env.get("HF_MODEL_ID") or "model")


def local_model_problem(sim: ClusterSim, pod: Obj) -> str | None:
    """Why a vLLM/SGLang container cannot load its model from an FSx mount (the path holds no model: no
    config.json), as the server's startup error; None when it can or the model is not on an FSx mount."""
    from hyperpod_twin.sim import fsx_mounts

    for container in (pod.get("spec") or {}).get("containers") or []:
        if kind_of(container) not in ("vllm", "sglang"):
            continue
        words = _words(container)
        path = _arg(words, "--model", "--model-path")
        if path is None and "serve" in words and words.index("serve") + 1 < len(words):
            path = words[words.index("serve") + 1]
        if not path or not path.startswith("/"):
            continue
        lustre = fsx_mounts.resolve(sim, pod, container, path.rstrip("/"))
        if lustre is not None and f"{lustre.path}/config.json" not in lustre.files:
            return f"OSError: Can't load the configuration of '{path}': no config.json in that local directory"
    return None


def ports_of(container: Obj, kind: str) -> list[int]:
    """Ports the server listens on: declared containerPorts, else --port, else the server's default."""
    declared = [int(p["containerPort"]) for p in container.get("ports") or [] if p.get("containerPort")]
    flag = _arg(_words(container), "--port")
    if flag and flag.isdigit() and int(flag) not in declared:
        declared.append(int(flag))
    ports = declared or [_DEFAULT_PORTS[kind]]
    metrics = _arg(_words(container), "--prometheus-port") if kind == "router" else None
    if metrics and metrics.isdigit() and int(metrics) not in ports:
        ports.append(int(metrics))  # the router serves /metrics on its Prometheus port too
    return ports


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

    value = _arg(_words(container), "--api-key")
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


def _json(status: int, body: Any) -> ProxyResponse:
    return ProxyResponse(status, json.dumps(body).encode())


class ModelServer:
    """One simulated OpenAI-compatible server (vLLM or SGLang flavour)."""

    def __init__(
        self,
        kind: str,
        model: str,
        wall: Callable[[], float],
        log: Callable[[str], None] | None = None,
        key: str | None = None,
    ) -> None:
        self.kind = kind
        self.model = model
        self._key = key
        self._wall = wall
        self._log = log
        self._lock = threading.Lock()
        self._requests: dict[str, int] = {}
        self._tokens = {"prompt": 0, "generation": 0}

    def __call__(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> ProxyResponse:
        route = "/" + path.lstrip("/")
        if self._locked(route, headers):
            response = _json(401, {"error": "Unauthorized"})
        else:
            response = self._answer(method, route, body)
        if self._log is not None:  # an access log line, as uvicorn writes it
            reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
                      405: "Method Not Allowed"}.get(
                response.status, ""
            )
            self._log(
                f'INFO:     127.0.0.1:0 - "{method} /{path.lstrip("/")} HTTP/1.1" {response.status} {reason}'.rstrip()
            )
        return response

    def _locked(self, route: str, headers: dict[str, str]) -> bool:
        """--api-key as the engines enforce it: vLLM guards the /v1 routes, SGLang every route but /health* and
        /metrics; a request passes with `Authorization: Bearer <key>`."""
        if self._key is None:
            return False
        guarded = route.startswith("/v1") if self.kind == "vllm" else not route.startswith(("/health", "/metrics"))
        given = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        return guarded and given != f"Bearer {self._key}"

    def _answer(self, method: str, route: str, body: bytes) -> ProxyResponse:
        with self._lock:
            self._requests[route] = self._requests.get(route, 0) + 1
        if route in ("/health", "/ping", "/health_generate"):
            return ProxyResponse(200, b"", {"Content-Type": "text/plain"})
        if route == "/v1/models":
            return _json(200, {"object": "list", "data": [self._model_card()]})
        if route == "/get_model_info":
            return _json(200, {"model_path": self.model, "is_generation": True})
        if route == "/metrics":
            return ProxyResponse(200, self._metrics().encode(), {"Content-Type": "text/plain; version=0.0.4"})
        if route in ("/v1/chat/completions", "/v1/completions", "/invocations", "/generate"):
            if method != "POST":
                return _json(405, _error("Method Not Allowed", "invalid_request_error", 405))
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                return _json(400, _error("request body is not valid JSON", "BadRequestError", 400))
            if not isinstance(request, dict):
                return _json(400, _error("request body must be a JSON object", "BadRequestError", 400))
            return self._complete(route, request)
        return _json(404, {"detail": "Not Found"})

    def _model_card(self) -> Obj:
        return {
            "id": self.model,
            "object": "model",
            "created": int(self._wall()),
            "owned_by": self.kind,
            "root": self.model,
            "parent": None,
            "max_model_len": 8192,
        }

    def _complete(self, route: str, request: Obj) -> ProxyResponse:
        wanted = request.get("model")
        if wanted and wanted != self.model:
            return _json(404, _error(f"The model `{wanted}` does not exist.", "NotFoundError", 404))
        chat = route == "/v1/chat/completions" or (route == "/invocations" and "messages" in request)
        if chat:
            messages = request.get("messages") or []
            last: Obj = next((m for m in reversed(messages) if m.get("role") == "user"), {})
            prompt = _text_of(last.get("content", ""))
            prompt_tokens = sum(len(_text_of(m.get("content", "")).split()) + 4 for m in messages)
        else:
            prompt = str(request.get("prompt", request.get("text", "")))
            prompt_tokens = len(prompt.split())
        content = f"{SIMULATED} {self.kind} model {self.model} received: {prompt[:200]}"
        limit = request.get("max_tokens") or request.get("max_completion_tokens")
        words = content.split()
        if isinstance(limit, int) and limit > 0:
            words = words[:limit]
        content = " ".join(words)
        completion_tokens = len(words)
        with self._lock:
            self._tokens["prompt"] += prompt_tokens
            self._tokens["generation"] += completion_tokens
        created = int(self._wall())
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        finish = "length" if isinstance(limit, int) and 0 < limit < len(content.split()) else "stop"
        if chat:
            ident = f"chatcmpl-{uuid.uuid4().hex}"
            if request.get("stream"):
                return self._stream(ident, created, words)
            choice: Obj = {
                "index": 0,
                "message": {"role": "assistant", "content": content, "tool_calls": []},
                "logprobs": None,
                "finish_reason": finish,
            }
            return _json(
                200,
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": created,
                    "model": self.model,
                    "choices": [choice],
                    "usage": usage,
                    "system_fingerprint": "twin-simulated",
                },
            )
        return _json(
            200,
            {
                "id": f"cmpl-{uuid.uuid4().hex}",
                "object": "text_completion",
                "created": created,
                "model": self.model,
                "choices": [{"index": 0, "text": content, "logprobs": None, "finish_reason": finish}],
                "usage": usage,
            },
        )

    def _stream(self, ident: str, created: int, words: list[str]) -> ProxyResponse:
        chunks = []
        base = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": self.model}
        chunks.append(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}}]))
        for i, word in enumerate(words):
            chunks.append(dict(base, choices=[{"index": 0, "delta": {"content": ("" if i == 0 else " ") + word}}]))
        chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        payload = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return ProxyResponse(200, payload.encode(), {"Content-Type": "text/event-stream"})

    def _metrics(self) -> str:
        prefix = "vllm" if self.kind == "vllm" else "sglang"
        with self._lock:
            requests = sum(v for k, v in self._requests.items() if "completions" in k or k == "/invocations")
            lines = [
                f"# HELP {prefix}:request_success_total Simulated successful requests.",
                f"# TYPE {prefix}:request_success_total counter",
                f'{prefix}:request_success_total{{model_name="{self.model}"}} {requests}',
                f"# TYPE {prefix}:prompt_tokens_total counter",
                f'{prefix}:prompt_tokens_total{{model_name="{self.model}"}} {self._tokens["prompt"]}',
                f"# TYPE {prefix}:generation_tokens_total counter",
                f'{prefix}:generation_tokens_total{{model_name="{self.model}"}} {self._tokens["generation"]}',
                f"# TYPE {prefix}:num_requests_running gauge",
                f'{prefix}:num_requests_running{{model_name="{self.model}"}} 0',
            ]
        return "\n".join(lines) + "\n"


def _text_of(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _error(message: str, etype: str, code: int) -> Obj:
    return {"object": "error", "message": message, "type": etype, "param": None, "code": code}


class RouterHandler:
    """The SGLang router: forwards each request to a worker (round robin over --worker-urls, or over
    Ready pods matching --selector with --service-discovery)."""

    def __init__(self, sim: ClusterSim, namespace: str, container: Obj) -> None:
        self.sim = sim
        self.namespace = namespace
        words = _words(container)
        self._urls = _list_arg(words, "--worker-urls")
        self._selector = dict(s.split("=", 1) for s in _list_arg(words, "--selector") if "=" in s)
        self._discovery = "--service-discovery" in words
        sd_port = _arg(words, "--service-discovery-port")
        self._sd_port = int(sd_port) if sd_port and sd_port.isdigit() else 80
        sd_ns = _arg(words, "--service-discovery-namespace")
        self._sd_namespace = sd_ns
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._running: list[tuple[float, str]] = []  # (twin time the request finishes, worker URL)
        self._processed: dict[str, int] = {}

    def __call__(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> ProxyResponse:
        route = "/" + path.lstrip("/")
        workers = self._workers()
        if route == "/health":
            return ProxyResponse(200 if workers else 503, b"", {"Content-Type": "text/plain"})
        if route == "/workers" or route == "/list_workers":
            return _json(200, {"urls": [url for _, _, _, _, url in workers]})
        if route == "/metrics":
            return ProxyResponse(200, self._metrics(workers).encode(), {"Content-Type": "text/plain; version=0.0.4"})
        if not workers:
            return _json(503, {"error": {"message": "no available workers", "type": "service_unavailable"}})
        start = next(self._counter)
        for i in range(len(workers)):
            _, _, _, handler, url = workers[(start + i) % len(workers)]
            response = handler(method, route, query, headers, body)
            if response.status < 500:
                self._account(route, url, response)
                return response
        return response

    def _account(self, route: str, url: str, response: ProxyResponse) -> None:
        """A generation request stays running for its simulated generation time (prefill, then each
        completion token at the simulator's decode speed): what sgl_router_running_requests counts."""
        if route not in GENERATION_ROUTES or response.status != 200:
            return
        try:
            tokens = int((json.loads(response.body or b"{}").get("usage") or {}).get("completion_tokens", 0))
        except (ValueError, AttributeError, TypeError):
            tokens = 0
        config = self.sim.config
        done = self.sim.clock.now() + config.prefill_seconds + tokens * config.decode_seconds_per_token
        with self._lock:
            self._running.append((done, url))
            self._processed[url] = self._processed.get(url, 0) + 1

    def _metrics(self, workers: list[tuple[str, str, int, ProxyHandler, str]]) -> str:
        """The router's Prometheus metrics (sgl-router names): per-worker running and processed requests and
        the number of healthy workers."""
        now = self.sim.clock.now()
        with self._lock:
            self._running = [(done, url) for done, url in self._running if done > now]
            running = {url: 0 for *_, url in workers}
            for _, url in self._running:
                running[url] = running.get(url, 0) + 1
            processed = {**{url: 0 for *_, url in workers}, **self._processed}
        lines = ["# TYPE sgl_router_running_requests gauge"]
        lines += [f'sgl_router_running_requests{{worker="{url}"}} {n}' for url, n in sorted(running.items())]
        lines.append("# TYPE sgl_router_processed_requests_total counter")
        lines += [f'sgl_router_processed_requests_total{{worker="{url}"}} {n}' for url, n in sorted(processed.items())]
        lines += ["# TYPE sgl_router_active_workers gauge", f"sgl_router_active_workers {len(workers)}"]
        return "\n".join(lines) + "\n"

    def _workers(self) -> list[tuple[str, str, int, ProxyHandler, str]]:
        from hyperpod_twin.sim.core import PODS, SERVICES

        found: list[tuple[str, str, int, ProxyHandler, str]] = []
        pods = self.sim.list(PODS)
        if self._discovery and self._selector:
            for pod in pods:
                ns = pod["metadata"]["namespace"]
                if self._sd_namespace and ns != self._sd_namespace:
                    continue
                if not kobj.pod_is_ready(pod) or not kobj.match_map(self._selector, pod["metadata"].get("labels")):
                    continue
                handler = self.sim.runtime.pod_http.lookup(ns, pod["metadata"]["name"], self._sd_port)
                if handler is not None and not isinstance(handler, RouterHandler):
                    found.append((ns, pod["metadata"]["name"], self._sd_port, handler, _url(pod, self._sd_port)))
        for url in self._urls:
            parsed = urlparse(url if "://" in url else f"http://{url}")
            host, port = parsed.hostname or "", parsed.port or 80
            for pod in pods:
                if not kobj.pod_is_ready(pod):
                    continue
                ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
                if pod.get("status", {}).get("podIP") == host or host.split(".")[0] == name:
                    handler = self.sim.runtime.pod_http.lookup(ns, name, port)
                    if handler is not None:
                        found.append((ns, name, port, handler, _url(pod, port)))
            # A Service DNS name (svc.ns.svc.cluster.local): every ready pod behind its selector.
            parts = host.split(".")
            svc_ns = parts[1] if len(parts) > 1 else self.namespace
            svc = self.sim.get(SERVICES, svc_ns, parts[0])
            if svc is None:
                continue
            for sport in svc.get("spec", {}).get("ports") or []:
                if int(sport.get("port", 0)) != port:
                    continue
                target = sport.get("targetPort", port)
                for pod in pods:
                    if pod["metadata"]["namespace"] != svc_ns or not kobj.pod_is_ready(pod):
                        continue
                    if not kobj.match_map(svc["spec"].get("selector") or {"-": "-"}, pod["metadata"].get("labels")):
                        continue
                    tport = kobj.target_port(pod, target)
                    handler = self.sim.runtime.pod_http.lookup(svc_ns, pod["metadata"]["name"], tport)
                    if handler is not None:
                        found.append((svc_ns, pod["metadata"]["name"], tport, handler, _url(pod, tport)))
        return found


def _url(pod: Obj, port: int) -> str:
    """A worker's URL as the router names it (pod IP and port)."""
    return f"http://{pod.get('status', {}).get('podIP') or pod['metadata']['name']}:{port}"


def _list_arg(words: list[str], name: str) -> list[str]:
    values: list[str] = []
    for i, word in enumerate(words):
        if word == name:
            for nxt in words[i + 1 :]:
                if nxt.startswith("--"):
                    break
                values.append(nxt)
        elif word.startswith(name + "="):
            values.extend(word.split("=", 1)[1].split(","))
    return values
