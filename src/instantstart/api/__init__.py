"""The REST face and the HTTP server that also carries the MCP endpoint, health and metrics."""
