"""The OpenAPI 3.1 document, generated from the catalog (the same models the routes validate with)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from instantstart import __version__
from instantstart.catalog.groups import group_description
from instantstart.catalog.registry import Catalog, OperationSpec
from instantstart.catalog.routes import API_PREFIX
from instantstart.catalog.schema import arguments_schema

REF = "#/components/schemas/{model}"

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "hint": {"type": ["string", "null"]},
                "details": {"type": "object"},
            },
        }
    },
}


def _schema(model: type[BaseModel], components: dict[str, Any], mode: str) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, ref_template=REF, mode=mode)  # type: ignore[arg-type]
    for name, definition in schema.pop("$defs", {}).items():
        components[name] = definition
    components[model.__name__] = schema
    return {"$ref": REF.format(model=model.__name__)}


def _parameters(spec: OperationSpec, components: dict[str, Any]) -> list[dict[str, Any]]:
    schema = spec.input_model.model_json_schema(by_alias=True, ref_template=REF, mode="validation")
    for name, definition in schema.pop("$defs", {}).items():
        components[name] = definition
    required = set(schema.get("required", []))
    params = []
    in_path = set(spec.path_params)
    for name, prop in schema.get("properties", {}).items():
        location = "path" if name in in_path else "query"
        if location == "query" and spec.method != "GET":
            continue
        params.append(
            {
                "name": name,
                "in": location,
                "required": location == "path" or name in required,
                "schema": prop,
                **({"description": prop["description"]} if "description" in prop else {}),
            }
        )
    if spec.mutating:
        params.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:\\-]{1,200}$"},
                "description": "Retrying with the same key returns the same operation.",
            }
        )
    return params


def build_openapi(catalog: Catalog) -> dict[str, Any]:
    """The whole document: one path item per operation, shared component schemas, bearer auth."""
    components: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for spec in catalog:
        error_ref = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
        op: dict[str, Any] = {
            "operationId": spec.name,
            "summary": spec.summary,
            "description": spec.tool_description,
            "tags": [spec.cli_group],
            # The same behaviour the MCP tool annotations carry, for REST clients and gateways.
            "x-instantstart-behaviour": {
                "class": spec.behaviour,
                "readOnly": spec.read_only,
                "openWorld": spec.open_world,
                "destructive": spec.destructive,
                "idempotent": spec.idempotent,
            },
            "parameters": _parameters(spec, components),
            "responses": {
                ("202" if spec.mutating else "200"): {
                    "description": "Operation recorded" if spec.mutating else "OK",
                    "content": {
                        "application/json": {"schema": _schema(spec.output_model, components, "serialization")}
                    },
                },
                "401": {"description": "Missing or wrong API token", **error_ref},
                "404": {"description": "Not found", **error_ref},
                "409": {"description": "Conflict", **error_ref},
                "422": {"description": "Invalid input", **error_ref},
                "default": {"description": "Error", **error_ref},
            },
        }
        if spec.method != "GET":
            body_schema = arguments_schema(spec.input_model, ref_template=REF)
            for name, definition in body_schema.pop("$defs", {}).items():
                components[name] = definition
            props = {k: v for k, v in body_schema.get("properties", {}).items() if k not in spec.path_params}
            body: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
            required = [r for r in body_schema.get("required", []) if r not in spec.path_params]
            if required:
                body["required"] = required
            op["requestBody"] = {"required": bool(required), "content": {"application/json": {"schema": body}}}
        paths.setdefault(API_PREFIX + spec.path, {})[spec.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "InstantStart control plane",
            "version": __version__,
            "description": "HyperPod on EKS control plane; every operation is also an MCP tool and a CLI command.",
        },
        "servers": [{"url": "/"}],
        "paths": paths,
        "tags": [{"name": g, "description": group_description(g)} for g in sorted({s.cli_group for s in catalog})],
        "components": {"schemas": components, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }
