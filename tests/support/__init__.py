"""Test support: servers in threads and processes, databases, and test-only operation kinds."""
