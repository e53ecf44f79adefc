"""The HTTP routes every face agrees on (defined below the catalog, in instantstart.routes, for the clients)."""

from instantstart.routes import API_PREFIX, tool_route

__all__ = ["API_PREFIX", "tool_route"]
