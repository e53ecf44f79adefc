"""Training recipes as data (data/recipes/*.yaml): typed fields with defaults rendered into a hyperpodrun job."""

from __future__ import annotations

import shlex
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from instantstart.catalog import operation
from instantstart.catalog.base import NoInput, WireModel
from instantstart.context import CallContext
from instantstart.manifests.training import S3_MOUNT
from instantstart.operations.models import OperationRef
from instantstart.services.training import checks
from instantstart.services.training.ray_jobs import RayJobRequest, submit_ray
from instantstart.services.training.submit import JobShape, default_instance_type, submit_job

DATA = Path(__file__).resolve().parents[2] / "data" / "recipes"


class RecipeField(BaseModel):
    """One typed field of a recipe: `path` fields must lie under /s3 (or /fsx with fsxClaim); a `config` field
    (default "": unused) names the user's own framework config file under /s3, ending in one of `suffixes`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["str", "int", "float", "bool", "path", "choice", "config"]
    default: Any
    description: str = ""
    min: float | None = None
    max: float | None = None
    values: list[str] | None = None
    suffixes: list[str] | None = None


class Recipe(BaseModel):
    """A recipe file: default image, fields, and the entry words and env they render into."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    path: Literal["hyperpod", "kuberay"] = Field(
        default="hyperpod", description="hyperpod: a HyperPodPyTorchJob through hyperpodrun; kuberay: a RayJob.")
    image: str
    fields: dict[str, RecipeField]
    entry: list[str]
    config_entry: list[str] | None = Field(default=None, alias="configEntry", description="The entry words when "
                                           "the `config` field is set (the framework reads the rest from it).")
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _config(self) -> Recipe:
        configs = [n for n, f in self.fields.items() if f.type == "config"]
        if configs and (self.path != "hyperpod" or self.config_entry is None or len(configs) > 1):
            # Only the HyperPod path looks a config file up in the claim's bucket before submitting.
            raise ValueError(f"recipe {self.name}: a config field needs path hyperpod, a configEntry, and is one")
        return self


@cache
def recipes() -> dict[str, Recipe]:
    """Every recipe file, by name."""
    out = {}
    for path in sorted(DATA.glob("*.yaml")):
        recipe = Recipe.model_validate(yaml.safe_load(path.read_text()))
        out[recipe.name] = recipe
    return out


def _value(name: str, spec: RecipeField, raw: Any) -> Any:
    field = f"fields.{name}"
    wrong = checks.field_error(field, f"{raw!r} is not a {spec.type}", f"Give a {spec.type}: {spec.description}")
    if spec.type == "bool":
        if not isinstance(raw, bool):
            raise wrong
        return raw
    if spec.type in ("int", "float"):
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or (spec.type == "int" and raw != int(raw)):
            raise wrong
        value = int(raw) if spec.type == "int" else float(raw)
        if (spec.min is not None and value < spec.min) or (spec.max is not None and value > spec.max):
            raise checks.field_error(field, f"{value} is outside [{spec.min}, {spec.max}]",
                                     f"Give a value between {spec.min} and {spec.max}.")
        return value
    if not isinstance(raw, str):
        raise wrong
    if spec.type == "path":
        checks.check_under_mount(field, raw)
    if spec.type == "config" and raw:
        checks.check_config_path(field, raw, spec.suffixes or [".yaml", ".yml"])
    if spec.type == "choice" and raw not in (spec.values or []):
        raise checks.field_error(field, f"{raw!r} is not one of {', '.join(spec.values or [])}",
                                 f"Use one of {', '.join(spec.values or [])}.")
    return raw


def render(recipe: Recipe, given: dict[str, Any], shape: dict[str, str] | None = None
           ) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """Entry words, env and the resolved field values (defaults filled in, every value checked); `shape` adds
    the job's own values (`{nodes}`, `{gpusPerNode}`) to what the entry may name."""
    unknown = sorted(set(given) - set(recipe.fields))
    if unknown:
        raise checks.field_error(f"fields.{unknown[0]}", f"not a field of recipe {recipe.name}",
                                 f"Fields: {', '.join(recipe.fields)} (training_recipe_list).")
    values = {n: _value(n, f, given.get(n, f.default)) for n, f in recipe.fields.items()}
    text = {**(shape or {}), **{n: (str(v).lower() if isinstance(v, bool) else str(v)) for n, v in values.items()}}
    entry = recipe.entry
    if config_files(recipe, values):
        [config] = [n for n, f in recipe.fields.items() if f.type == "config"]
        # A field sent at its default (a form sends every field) says nothing the config file does not.
        also = sorted(n for n in given if n != config and values[n] != recipe.fields[n].default)
        if also:
            raise checks.field_error(f"fields.{also[0]}", f"is set by your config file when {config} is given",
                                     f"Put {also[0]} in the config file, or leave {config} out.")
        entry = recipe.config_entry or entry
    words: list[str] = []
    for word in entry:
        if word.startswith("{") and word.endswith("...}"):
            words += shlex.split(text[word[1:-4]])
        else:
            words.append(word.format_map(text))
    env = {k: v.format_map(text) for k, v in recipe.env.items()}
    return words, env, values


def config_files(recipe: Recipe, values: dict[str, Any]) -> dict[str, str]:
    """The user's config file the job reads (`fields.<name>` → path under /s3), when the config field is set."""
    return {f"fields.{n}": str(values[n]) for n, f in recipe.fields.items() if f.type == "config" and values[n]}


def uses_s3(recipe: Recipe) -> bool:
    """Whether the recipe has path fields (by default under /s3: it needs the claim)."""
    return any(f.type == "path" for f in recipe.fields.values())


def needs_s3(recipe: Recipe, values: dict[str, Any]) -> bool:
    """Whether any of the recipe's path values lies under /s3 (then the S3 claim must exist)."""
    return bool(config_files(recipe, values)) or any(
        f.type == "path" and checks.under(str(values[n]), S3_MOUNT) for n, f in recipe.fields.items())


class RecipeInfo(WireModel):
    """A recipe as an agent picks it."""

    name: str
    description: str
    path: str
    image: str
    fields: dict[str, dict[str, Any]]


class RecipeList(WireModel):
    """The recipes."""

    recipes: list[RecipeInfo]


@operation("training_recipe_list", method="GET", path="/training/recipes", example={})
async def training_recipe_list(ctx: CallContext, req: NoInput) -> RecipeList:
    """The training recipes (pytorch, llama-factory, ms-swift on the HyperPod training operator; verl on KubeRay):
    path, default image and each field's type, default and bounds; path fields must lie under /s3 (or /fsx with
    fsxClaim). Read-only."""
    return RecipeList(recipes=[
        RecipeInfo(name=r.name, description=r.description, path=r.path, image=r.image,
                   fields={n: f.model_dump(exclude_none=True) for n, f in r.fields.items()})
        for r in recipes().values()
    ])


class RecipeRequest(JobShape):
    """A recipe, its field values (defaults for the rest) and the job's shape."""

    recipe: str = Field(min_length=1, max_length=64, description="A name from training_recipe_list.")
    fields: dict[str, Any] = Field(default_factory=dict, max_length=64)
    image: str | None = Field(default=None, min_length=3, max_length=512, pattern=r"^[^\s]+$",
                              description="Default: the recipe's image.")


@operation(
    "training_recipe_submit",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/training/recipes/submit",
    completion="job_get_status",
    example={"recipe": "pytorch", "jobName": "demo", "instanceType": "ml.g6.4xlarge"},
)
async def training_recipe_submit(ctx: CallContext, req: RecipeRequest) -> OperationRef:
    """Submit a recipe as a HyperPodPyTorchJob (same checks and recovery budget as training_job_submit): fields
    are typed, defaulted and path fields checked to lie under /s3 (the cluster's S3 claim must exist) or under /fsx
    (fsxClaim must name an FSx claim InstantStart created, mounted at /fsx). llama-factory and ms-swift take the
    user's own framework config instead of the other fields: `configFile` (a file under /s3: LLaMA-Factory
    .yaml/.yml/.json, ms-swift .json), which must exist in the claim's bucket before anything is submitted."""
    recipe = recipes().get(req.recipe)
    if recipe is None:
        raise checks.field_error("recipe", f"no recipe {req.recipe!r}", f"Recipes: {', '.join(recipes())}.")
    req = req.model_copy(update={"instance_type": await default_instance_type(ctx, req)})
    if recipe.path == "kuberay":
        return await _submit_on_kuberay(ctx, recipe, req)
    words, env, values = render(recipe, req.fields)
    shape = req.model_copy(update={"env": {**env, **req.env}})
    return await submit_job(ctx, shape, req.image or recipe.image, words, recipe=recipe.name,
                            needs_claim=needs_s3(recipe, values), files=config_files(recipe, values))


async def _submit_on_kuberay(ctx: CallContext, recipe: Recipe, req: RecipeRequest) -> OperationRef:
    """A KubeRay recipe: the job's shape becomes a RayJob (recovery.jobMaxRetryCount → backoffLimit)."""
    for name, value in (("elastic", req.elastic), ("hangDetection", req.hang_detection),
                        ("queueName", req.queue_name), ("priority", req.priority), ("topology", req.topology),
                        ("vcpu", req.vcpu), ("memoryGiB", req.memory_gib)):
        if value:
            raise checks.field_error(name, f"is not supported on the KubeRay path (recipe {recipe.name})",
                                     f"Leave {name} out; it applies to HyperPodPyTorchJob recipes.")
    gpus = checks.gpus_per_node(req.instance_type, req.gpus_per_node)
    words, env, values = render(recipe, req.fields, {"nodes": str(req.nodes), "gpusPerNode": str(gpus)})
    # Only a namespace the caller gave: none given, the team placement picks it (services/teams/placement.py).
    given: dict[str, Any] = {"namespace": req.namespace} if "namespace" in req.model_fields_set else {}
    ray = RayJobRequest(
        job_name=req.job_name, image=req.image or recipe.image, entrypoint=shlex.join(words),
        instance_type=req.instance_type, nodes=req.nodes, gpus_per_node=gpus, efa=req.efa, env={**env, **req.env},
        retries=min(req.recovery.job_max_retry_count, 10), s3_claim=req.s3_claim, fsx_claim=req.fsx_claim,
        pod_annotations=dict(req.pod_annotations), cluster_tag=req.cluster_tag, mlflow=req.mlflow,
        **given,
    )
    return await submit_ray(ctx, ray, words, recipe=recipe.name, needs_claim=needs_s3(recipe, values))
