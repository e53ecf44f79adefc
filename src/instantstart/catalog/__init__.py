"""The operation catalog: every operation declared once, from which all four faces are derived."""

from instantstart.catalog.registry import CATALOG, Catalog, OperationSpec, operation

__all__ = ["CATALOG", "Catalog", "OperationSpec", "operation"]
