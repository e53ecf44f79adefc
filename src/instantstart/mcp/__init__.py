"""The MCP face: tools generated from the catalog, over streamable HTTP (/mcp) and stdio (a REST proxy)."""
