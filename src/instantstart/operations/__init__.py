"""The operations engine: persisted operations with stages, a lease-holding runner, idempotency."""
