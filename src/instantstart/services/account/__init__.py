"""Account-level services: `instantstart doctor` and the control plane's shipped IAM policy."""
