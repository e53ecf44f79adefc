"""HTTP routes every face agrees on: the REST prefix and the generic tool route (below the faces and the catalog)."""

API_PREFIX = "/api/v1"


def tool_route(name: str) -> str:
    """The route that invokes any tool by name with a JSON body of its arguments."""
    return f"{API_PREFIX}/tools/{name}"
