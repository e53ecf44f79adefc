"""Teams: HyperPod task governance (compute quotas per team), where members' jobs go, why a queued job waits."""
