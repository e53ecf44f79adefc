"""The dependency catalog: loading and validating data/dependencies.yaml, and ordering entries."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from instantstart.validation import DNS1123_LABEL_RE

NAME_PATTERN = DNS1123_LABEL_RE.pattern
POLICY_TEMPLATES = ("projectBucket",)


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class WorkloadRef(_Model):
    """A DaemonSet or Deployment that must be ready."""

    namespace: str = Field(pattern=NAME_PATTERN)
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class Readiness(_Model):
    """Workloads checked for readiness besides the add-on or release itself."""

    daemon_sets: tuple[WorkloadRef, ...] = ()
    deployments: tuple[WorkloadRef, ...] = ()


class PodIdentity(_Model):
    """An IAM role for an add-on's service account through EKS Pod Identity."""

    service_account: str = Field(pattern=NAME_PATTERN)
    namespace: str = Field(pattern=NAME_PATTERN)
    role: str = Field(pattern=r"^[a-z0-9][-a-z0-9]{0,20}$", description="instantstart-<tag>-<role>")
    policy: Literal["projectBucket"]


class Dependency(_Model):
    """One catalog entry."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    source: Literal["addon", "helm", "manifests"]
    default: bool = False
    depends_on: tuple[str, ...] = ()
    version: str | None = Field(default=None, pattern=r"^v?[0-9A-Za-z.+-]{1,64}$")
    min_version: str | None = Field(default=None, pattern=r"^v?[0-9A-Za-z.+-]{1,64}$")
    namespace: str = Field(pattern=NAME_PATTERN)
    values: dict[str, Any] = Field(default_factory=dict)
    addon: str | None = Field(default=None, pattern=NAME_PATTERN)
    chart: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9_.]{0,100}[a-z0-9])?$")
    release: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$")
    repository: str | None = Field(default=None, pattern=r"^(https?|oci)://[^\s'\"`;|&$<>\\]+$")
    manifests: str | None = Field(default=None, pattern=NAME_PATTERN, description="data/manifests/<dir>")
    pod_identity: PodIdentity | None = None
    readiness: Readiness = Readiness()

    @model_validator(mode="after")
    def _source_fields(self) -> Dependency:
        if self.source == "manifests":
            if not self.manifests:
                raise ValueError(f"{self.name}: a manifests entry needs `manifests`")
            if self.addon or self.chart or self.release or self.repository or self.pod_identity:
                raise ValueError(f"{self.name}: addon/helm fields do not belong to manifests entries")
            return self
        if self.manifests:
            raise ValueError(f"{self.name}: `manifests` belongs to manifests entries")
        if self.source == "addon":
            if not self.addon:
                raise ValueError(f"{self.name}: an addon entry needs `addon`")
            if self.chart or self.release or self.repository:
                raise ValueError(f"{self.name}: chart/release/repository belong to helm entries")
        else:
            if not (self.chart and self.release and self.version):
                raise ValueError(f"{self.name}: a helm entry needs `chart`, `release` and `version`")
            if self.addon or self.pod_identity:
                raise ValueError(f"{self.name}: addon/podIdentity belong to addon entries")
        return self


class DependencyCatalog(_Model):
    """Every dependency, validated: unique names, known dependsOn targets, no cycles."""

    dependencies: tuple[Dependency, ...]

    @model_validator(mode="after")
    def _graph(self) -> DependencyCatalog:
        names = [d.name for d in self.dependencies]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate dependency names: {', '.join(duplicates)}")
        for dep in self.dependencies:
            unknown = [n for n in dep.depends_on if n not in names]
            if unknown:
                raise ValueError(f"{dep.name}: dependsOn names unknown dependencies: {', '.join(unknown)}")
            for name in dep.depends_on:
                other = self.get(name)
                if dep.default and not other.default:
                    raise ValueError(f"{dep.name} is a default but depends on the optional {name}")
        self.order(names)  # raises on a cycle
        return self

    @property
    def names(self) -> list[str]:
        """Every dependency name, in file order."""
        return [d.name for d in self.dependencies]

    @property
    def defaults(self) -> list[str]:
        """The dependencies cluster_configure_dependencies installs."""
        return [d.name for d in self.dependencies if d.default]

    def get(self, name: str) -> Dependency:
        """The entry named `name` (KeyError when unknown)."""
        for dep in self.dependencies:
            if dep.name == name:
                return dep
        raise KeyError(name)

    def order(self, names: list[str] | tuple[str, ...]) -> list[Dependency]:
        """`names` plus everything they depend on, dependencies first (file order among equals)."""
        ordered: list[Dependency] = []
        state: dict[str, str] = {}

        def visit(name: str, path: tuple[str, ...]) -> None:
            if state.get(name) == "done":
                return
            if state.get(name) == "visiting":
                raise ValueError(f"dependency cycle: {' -> '.join((*path, name))}")
            state[name] = "visiting"
            dep = self.get(name)
            for parent in dep.depends_on:
                visit(parent, (*path, name))
            state[name] = "done"
            ordered.append(dep)

        wanted = set(names)
        for name in [n for n in self.names if n in wanted]:
            visit(name, ())
        unknown = wanted - set(self.names)
        if unknown:
            raise KeyError(", ".join(sorted(unknown)))
        return ordered


def parse_catalog(text: str) -> DependencyCatalog:
    """Validate catalog YAML text; ValueError naming the problem otherwise."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"dependency catalog is not valid YAML: {exc}") from exc
    try:
        return DependencyCatalog.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"dependency catalog is invalid: {exc}") from exc


@lru_cache(maxsize=1)
def load_catalog() -> DependencyCatalog:
    """The catalog shipped in instantstart/data/dependencies.yaml (validated once per process)."""
    text = resources.files("instantstart.data").joinpath("dependencies.yaml").read_text(encoding="utf-8")
    return parse_catalog(text)
