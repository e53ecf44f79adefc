"""Read-only diagnostics for agents: events, bounded pod logs, node descriptions."""
