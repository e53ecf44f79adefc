"""Training: HyperPodPyTorchJobs with an explicit recovery budget, recipes as data, job status, logs, deletion."""
