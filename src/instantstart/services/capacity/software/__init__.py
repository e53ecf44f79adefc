"""HyperPod software updates: the plan (batches, what each interrupts) and the rolling update with alarm rollback."""
