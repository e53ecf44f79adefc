"""The cluster domain: the six-stage creation pipeline, status and verification, import, preflight, deletion."""
