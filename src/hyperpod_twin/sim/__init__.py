"""The twin's simulator: kubelets, scheduler and controllers (workloads, operators) of each twin cluster."""
