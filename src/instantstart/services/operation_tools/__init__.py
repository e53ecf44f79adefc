"""Operation tools: reading, listing, retrying and cancelling persisted operations, and the polling primitive."""
