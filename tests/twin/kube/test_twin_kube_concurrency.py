"""Many concurrent watchers and writers: every watcher sees every change in order; streams clean up."""

from __future__ import annotations

import threading
import time
import uuid

import kubernetes

from tests.support.twin_kube import Cluster, client_for

WATCHERS = 20
WRITES = 30


def test_concurrent_watches_see_all_changes_in_order(cluster: Cluster) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    ns = "c-" + uuid.uuid4().hex[:8]
    core.create_namespace({"metadata": {"name": ns}})
    listeners_before = cluster.runtime.store.listener_count
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    results: list[list[str]] = [[] for _ in range(WATCHERS)]
    started = threading.Barrier(WATCHERS + 1)

    def watch(slot: int) -> None:
        api = client_for(cluster.url, cluster.ca_file, cluster.token)
        w = kubernetes.watch.Watch()
        started.wait(60)
        for event in w.stream(kubernetes.client.CoreV1Api(api).list_namespaced_config_map, ns,
                              resource_version=rv, timeout_seconds=60):
            results[slot].append(event["object"].data["n"])
            if len(results[slot]) == WRITES:
                w.stop()
        api.close()

    threads = [threading.Thread(target=watch, args=(i,)) for i in range(WATCHERS)]
    for thread in threads:
        thread.start()
    started.wait(60)

    def write(start: int) -> None:
        for n in range(start, WRITES, 3):
            if n:  # 0 is the value the config map is created with
                core.patch_namespaced_config_map("counter", ns, {"data": {"n": str(n)}})

    core.create_namespaced_config_map(ns, {"metadata": {"name": "counter"}, "data": {"n": "0"}})
    writers = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(20)
    for thread in threads:
        thread.join(30)
    first = results[0]
    assert len(first) == WRITES and sorted(first, key=int) == [str(n) for n in range(WRITES)]
    assert all(r == first for r in results)  # every watcher saw the same order
    deadline = time.monotonic() + 60
    while cluster.runtime.store.listener_count > listeners_before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cluster.runtime.store.listener_count == listeners_before  # closed watches unsubscribed
    core.delete_namespace(ns)
