"""The operations-engine target of a managed cluster: built and parsed in one place."""

from __future__ import annotations

from dataclasses import dataclass

_PREFIX = "cluster:"


@dataclass(frozen=True)
class OperationTarget:
    """The target an operation holds (one active mutation per target); a cluster's is `cluster:<tag>`."""

    cluster_tag: str

    def __str__(self) -> str:
        return f"{_PREFIX}{self.cluster_tag}"

    @classmethod
    def parse(cls, target: str | None) -> OperationTarget | None:
        """The cluster target an operation's stored target names, or None for another kind of target
        (`state:…`, a resource target) or none at all."""
        if not target or not target.startswith(_PREFIX):
            return None
        return cls(target.removeprefix(_PREFIX))


def cluster_target(tag: str) -> str:
    """The stored target string of cluster `tag` (what the runner and the operation store take)."""
    return str(OperationTarget(tag))


def cluster_of(target: str | None) -> str | None:
    """The cluster tag an operation's stored target names, if it names one."""
    parsed = OperationTarget.parse(target)
    return parsed.cluster_tag if parsed else None
