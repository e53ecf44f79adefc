"""Simulated vLLM / SGLang servers and their command lines: OpenAI-shaped answers that say they are simulated."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

from hyperpod_twin.kube.runtime import ProxyResponse
from hyperpod_twin.sim.kobj import Obj

SIMULATED = "[twin simulated response]"
_DEFAULT_PORTS = {"vllm": 8000, "sglang": 30000, "router": 30000}
GENERATION_ROUTES = ("/v1/chat/completions", "/v1/completions", "/invocations", "/generate")


def command_words(container: Obj) -> list[str]:
    """The container's command and args, as one list of words."""
    return [str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])]]


def kind_of(container: Obj) -> str | None:
    """ "router", "vllm", "sglang" or None, from the container's image and command line."""
    image = str(container.get("image", "")).lower()
    words = " ".join(command_words(container)).lower()
    if "sglang_router" in words or "sglang-router" in image or "sglang_router" in image:
        return "router"
    if "djl-inference" in image and "lmi" in image:
        return "vllm"  # an LMI container (JumpStart) on its vLLM rolling-batch backend
    for kind in ("vllm", "sglang"):
        if kind in image or kind in words:
            return kind
    return None


def flag_value(words: list[str], *names: str) -> str | None:
    """The value of the first of `names` given (`--flag value` or `--flag=value`), or None."""
    for i, word in enumerate(words):
        for name in names:
            if word == name and i + 1 < len(words):
                return words[i + 1]
            if word.startswith(name + "="):
                return word.split("=", 1)[1]
    return None


def model_id(container: Obj) -> str:
    """The served model name: --served-model-name, else --model / --model-path, else `vllm serve X`."""
    words = command_words(container)
    served = flag_value(words, "--served-model-name")
    if served:
        return served
    model = flag_value(words, "--model", "--model-path")
    if model:
        return model
    if "serve" in words:
        idx = words.index("serve")
        if idx + 1 < len(words) and not words[idx + 1].startswith("-"):
            return words[idx + 1]
    env = {e.get("name"): e.get("value") for e in container.get("env") or []}
    return str(env.get("MODEL_ID") or env.get("MODEL_NAME") or env.get("HF_MODEL_ID") or "model")


def ports_of(container: Obj, kind: str) -> list[int]:
    """Ports the server listens on: declared containerPorts, else --port, else the server's default."""
    declared = [int(p["containerPort"]) for p in container.get("ports") or [] if p.get("containerPort")]
    flag = flag_value(command_words(container), "--port")
    if flag and flag.isdigit() and int(flag) not in declared:
        declared.append(int(flag))
    ports = declared or [_DEFAULT_PORTS[kind]]
    metrics = flag_value(command_words(container), "--prometheus-port") if kind == "router" else None
    if metrics and metrics.isdigit() and int(metrics) not in ports:
        ports.append(int(metrics))  # the router serves /metrics on its Prometheus port too
    return ports


def json_reply(status: int, body: Any) -> ProxyResponse:
    """A JSON reply with `status`."""
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
            response = json_reply(401, {"error": "Unauthorized"})
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
            return json_reply(200, {"object": "list", "data": [self._model_card()]})
        if route == "/get_model_info":
            return json_reply(200, {"model_path": self.model, "is_generation": True})
        if route == "/metrics":
            return ProxyResponse(200, self._metrics().encode(), {"Content-Type": "text/plain; version=0.0.4"})
        if route in ("/v1/chat/completions", "/v1/completions", "/invocations", "/generate"):
            if method != "POST":
                return json_reply(405, _error("Method Not Allowed", "invalid_request_error", 405))
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                return json_reply(400, _error("request body is not valid JSON", "BadRequestError", 400))
            if not isinstance(request, dict):
                return json_reply(400, _error("request body must be a JSON object", "BadRequestError", 400))
            return self._complete(route, request)
        return json_reply(404, {"detail": "Not Found"})

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
            return json_reply(404, _error(f"The model `{wanted}` does not exist.", "NotFoundError", 404))
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
            return json_reply(
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
        return json_reply(
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


def flag_values(words: list[str], name: str) -> list[str]:
    """Every value given to a repeated or multi-valued flag `name`."""
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
