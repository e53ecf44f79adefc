"""Users, roles, API tokens and the audit trail (issue 28, items 1 and 5)."""
