"""Tracking operations: reading, listing, retrying and cancelling persisted operations, and the polling primitive."""
