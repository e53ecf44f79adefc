"""The `@operation` decorator and the registry that the REST, MCP and CLI faces are generated from."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from pydantic import BaseModel

from instantstart.catalog.base import WireModel
from instantstart.catalog.secret import secret_fields

Handler = Callable[[Any, Any], Awaitable[Any]]

_NAME = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
# A sentence ends at . ! or ? followed by white space, except after the usual abbreviations.
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)[.!?](?=\s|$)")


def first_sentence(text: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = inspect.cleandoc(text).split("\n\n", 1)[0]
    flat = " ".join(paragraph.split())
    match = _SENTENCE_END.search(flat)
    return flat[: match.end()] if match else flat

_PATH_PARAM = re.compile(r"{([A-Za-z][A-Za-z0-9]*)}")
# The three behaviour classes, from safest: what an agent may call unasked, what reaches outside, what changes.
READ_ONLY, SIDE_EFFECTING, MUTATING = "read-only", "side-effecting", "mutating"
SIDE_EFFECT_NOTE = (
    "\n\nSide-effecting: it reaches outside the control plane's own state (see above) and may cost money, but"
    " changes no managed resource; it is not read-only, so an agent asks before calling it."
)


@dataclass(frozen=True)
class OperationSpec:
    """One declared operation: name, models, behaviour, route, and its documentation."""

    name: str
    handler: Handler
    input_model: type[WireModel]
    output_model: type[BaseModel]
    method: str
    path: str
    mutating: bool
    completion: str | None
    description: str
    example: dict[str, Any] = field(default_factory=dict)
    cli_group: str = ""
    cli_command: str = ""
    destructive: bool = False
    idempotent: bool = True
    side_effecting: bool = False

    @property
    def behaviour(self) -> str:
        """read-only, side-effecting (acts outside the control plane, changes no managed resource) or mutating."""
        if self.mutating:
            return MUTATING
        return SIDE_EFFECTING if self.side_effecting else READ_ONLY

    @property
    def read_only(self) -> bool:
        """True when the operation only reads and acts on nothing (MCP `readOnlyHint`); only these are auto-approved."""
        return self.behaviour == READ_ONLY

    @property
    def open_world(self) -> bool:
        """True when the call acts outside the control plane's own state (MCP `openWorldHint`)."""
        return not self.read_only

    @property
    def summary(self) -> str:
        """The first sentence of the description (the CLI's short help, the OpenAPI summary)."""
        return first_sentence(self.description) or self.name

    @property
    def path_params(self) -> list[str]:
        """Names of the `{param}` segments of the route path (camelCase wire names)."""
        return _PATH_PARAM.findall(self.path)

    @property
    def tool_description(self) -> str:
        """What an agent reads: constraints first (the docstring), then how completion is decided."""
        text = inspect.cleandoc(self.description)
        if self.mutating:
            text += (
                "\n\nReturns {operationId, status, statusTool, pollAfterSeconds} at once; the work runs in"
                f" the background. Completion is decided by `{self.completion or 'operation_get'}`."
                " Pass the same `clientToken` to retry safely: it returns the same operation."
            )
        elif self.side_effecting:
            if "side-effecting:" not in text.lower():  # unless the docstring says precisely what it affects
                text += SIDE_EFFECT_NOTE
        elif "read-only" not in text.lower():  # said once, where the docstring does not say it already
            text += "\n\nRead-only."
        return text


class Catalog:
    """The registry of every operation, keyed by its (tool) name."""

    def __init__(self) -> None:
        self._specs: dict[str, OperationSpec] = {}

    def add(self, spec: OperationSpec) -> None:
        """Register `spec`; names and (method, path) pairs are unique."""
        if spec.name in self._specs:
            raise ValueError(f"operation {spec.name} declared twice")
        for other in self._specs.values():
            if (other.method, other.path) == (spec.method, spec.path):
                raise ValueError(f"{spec.name} and {other.name} share {spec.method} {spec.path}")
        self._specs[spec.name] = spec

    def get(self, name: str) -> OperationSpec | None:
        """The spec named `name`, if declared."""
        return self._specs.get(name)

    def __iter__(self) -> Iterator[OperationSpec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.name))

    def __len__(self) -> int:
        return len(self._specs)


CATALOG = Catalog()


def operation(
    name: str,
    *,
    method: str,
    path: str,
    completion: str | None = None,
    mutating: bool | None = None,
    side_effecting: bool = False,
    example: dict[str, Any] | None = None,
    cli: tuple[str, str] | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    catalog: Catalog | None = None,
) -> Callable[[Handler], Handler]:
    """Declare an operation once: `async def handler(ctx: CallContext, req: InputModel) -> OutputModel`.

    The input and output models come from the handler's annotations; the description is its
    docstring. `mutating` defaults to method != GET (False for a side-effecting one). `example` is a
    valid input used by the test that proves the faces agree. `cli` overrides the (group, command)
    derived from the name.

    Behaviour (the MCP annotations `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`, and the
    OpenAPI `x-instantstart-behaviour`), one of three classes: a read is read-only, not destructive and
    idempotent. `side_effecting=True`: the call reaches outside the control plane's own state with an effect (it
    sends data to a model server, invokes a billed endpoint, runs something) but changes no managed resource;
    not destructive, not idempotent unless declared. A mutating operation must declare both `destructive` (it
    deletes, interrupts or replaces something) and `idempotent` (repeating the call with the same arguments has
    no further effect). A GET is always read-only: the decorator refuses a GET declared side-effecting or
    mutating, and a docstring that calls a side-effecting or mutating operation read-only.
    """

    def decorate(handler: Handler) -> Handler:
        spec = _spec(name, handler, method=method.upper(), path=path, completion=completion, mutating=mutating,
                     side_effecting=side_effecting, example=example or {}, cli=cli, destructive=destructive,
                     idempotent=idempotent)
        (CATALOG if catalog is None else catalog).add(spec)  # an empty Catalog is falsy
        return handler

    return decorate


def _spec(
    name: str,
    handler: Handler,
    *,
    method: str,
    path: str,
    completion: str | None,
    mutating: bool | None,
    side_effecting: bool,
    example: dict[str, Any],
    cli: tuple[str, str] | None,
    destructive: bool | None,
    idempotent: bool | None,
) -> OperationSpec:
    """The checked spec of one `@operation` declaration (its rules: see `operation`)."""
    if not _NAME.match(name):
        raise ValueError(f"bad operation name {name!r}")
    input_model, output_model = _handler_models(name, handler)
    description = inspect.getdoc(handler) or name
    is_mutating = _is_mutating(name, method, description, mutating=mutating, side_effecting=side_effecting)
    _check_secrets(name, method, input_model, example)
    _check_declared(name, is_mutating, completion=completion, side_effecting=side_effecting, destructive=destructive,
                    idempotent=idempotent)
    for param in _PATH_PARAM.findall(path):
        if param not in {f.alias or n for n, f in input_model.model_fields.items()}:
            raise ValueError(f"{name}: path parameter {param} is not a field of {input_model.__name__}")
    group, _, command = name.partition("_")
    return OperationSpec(
        name=name,
        handler=handler,
        input_model=input_model,
        output_model=output_model,
        method=method,
        path=path,
        mutating=is_mutating,
        completion=completion,
        description=description,
        example=example,
        cli_group=cli[0] if cli else group,
        cli_command=cli[1] if cli else command.replace("_", "-"),
        destructive=bool(destructive),
        idempotent=(not side_effecting) if idempotent is None else idempotent,
        side_effecting=side_effecting,
    )


def _handler_models(name: str, handler: Handler) -> tuple[type[WireModel], type[BaseModel]]:
    """The input and output models of `async def handler(ctx, req: InputModel) -> OutputModel`."""
    hints = get_type_hints(handler)
    params = list(inspect.signature(handler).parameters)
    if len(params) != 2:
        raise TypeError(f"{name}: handler must take (ctx, req)")
    input_model = hints[params[1]]
    output_model = hints["return"]
    if not (isinstance(input_model, type) and issubclass(input_model, WireModel)):
        raise TypeError(f"{name}: input must be a WireModel subclass")
    if not (isinstance(output_model, type) and issubclass(output_model, BaseModel)):
        raise TypeError(f"{name}: output must be a pydantic model")
    return input_model, output_model


def _is_mutating(name: str, method: str, description: str, *, mutating: bool | None, side_effecting: bool) -> bool:
    """Whether the operation is mutating; refuses a GET or a docstring that disagrees with its class."""
    if side_effecting and mutating:
        raise ValueError(f"{name}: an operation is side-effecting or mutating, not both")
    is_mutating = False if side_effecting else (method != "GET" if mutating is None else mutating)
    if method == "GET" and (is_mutating or side_effecting):
        raise ValueError(
            f"{name}: a GET is read-only (caches, proxies and link prefetchers replay GETs); declare it"
            " method='POST' to be side-effecting or mutating"
        )
    if (is_mutating or side_effecting) and "read-only" in description.lower():
        raise ValueError(f"{name}: the docstring says read-only, but the operation is not (an agent reads it)")
    return is_mutating


def _check_secrets(name: str, method: str, input_model: type[WireModel], example: dict[str, Any]) -> None:
    """Secret fields never travel in a query string nor in the (published) example."""
    secrets = secret_fields(input_model)
    if secrets and method == "GET":
        raise ValueError(f"{name}: Secret fields {secrets} never travel in a query string (it gets logged)")
    for field_name in secrets:
        if field_name in example:
            raise ValueError(f"{name}: the example must not carry a value for the Secret field {field_name}")


def _check_declared(
    name: str, is_mutating: bool, *, completion: str | None, side_effecting: bool, destructive: bool | None,
    idempotent: bool | None,
) -> None:
    """A mutating operation names its completion tool and declares destructive= and idempotent=; the others fit."""
    if is_mutating and completion is None:
        raise ValueError(f"{name}: a mutating operation names the status tool that decides completion")
    if is_mutating and (destructive is None or idempotent is None):
        raise ValueError(f"{name}: a mutating operation declares destructive= and idempotent=")
    if side_effecting and destructive:
        raise ValueError(f"{name}: a side-effecting operation changes no managed resource (not destructive)")
    if not is_mutating and not side_effecting and (destructive or idempotent is False):
        raise ValueError(f"{name}: a read-only operation is neither destructive nor non-idempotent")
