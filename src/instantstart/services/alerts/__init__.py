"""Alerts: rules over the timeline and the watched state, an evaluator that opens and resolves them, notifications."""
