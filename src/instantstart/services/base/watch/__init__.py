"""The cluster's watches as a shared read: the informers and their projections (built-in and custom kinds), the
watch-fed node digest, freshness, the `from_watches` rule of the list tools, and the event timeline's writer.
Monitoring, alerts, training, inference and the status workflow read them; none of them owns them."""
