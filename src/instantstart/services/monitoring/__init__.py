"""Monitoring: watch-fed cluster state, node lists, the persistent timeline, and the Monitoring page's reads."""
