"""HyperPod instance groups: add (one create-time decision), scale and delete through the allowlist.

Importing the package registers its tools and kinds in catalog order: add, then scale and delete."""

from instantstart.services.capacity.instance_groups import add, resize  # noqa: F401
