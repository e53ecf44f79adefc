"""Twin seconds for each HyperPod progression (realistic orders of magnitude for HyperPod on EKS)."""

CLUSTER_SETUP = 480.0  # Creating -> InService at the earliest
NODE_BOOT = 420.0  # Pending -> Running (or -> deep health check)
INSTANCE_ASSIGN = 60.0  # Continuous mode: a new node has no EC2 instance (InstanceId) for this long
DEEP_HEALTH_CHECK = 240.0  # DeepHealthCheckInProgress -> Running
SHUTDOWN = 60.0  # ShuttingDown -> gone
REBOOT = 180.0
CLUSTER_DELETE = 300.0
SOFTWARE_UPDATE = 600.0
ALARM_CHECK = 60.0  # a rolling update checks its rollback alarms this often while a batch updates (1 period)
CAPACITY_RETRY = 300.0  # Continuous mode retries a short group this often
ROLLBACK = 120.0
AUTO_REPAIR_DELAY = 60.0  # NodeRecovery=Automatic acts this long after a health finding
