"""The Job controller: pods up to parallelism until completions succeed or backoffLimit is exceeded."""

from __future__ import annotations

import copy
from collections.abc import Hashable

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import OwnerController
from hyperpod_twin.sim.kinds import JOBS, PODS, nsname
from hyperpod_twin.sim.kobj import Obj

INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


def job_finished(job: Obj) -> str | None:
    """ "Complete" or "Failed" once the job has finished, else None."""
    for ctype in ("Complete", "Failed"):
        if kobj.is_true(job, ctype):
            return ctype
    return None


class JobController(OwnerController):
    """Runs a Job's pods (NonIndexed or Indexed), counts successes and failures, and finishes it
    with Complete (after SuccessCriteriaMet) or Failed (after FailureTarget), as Kubernetes 1.31
    reports them; honours suspend, backoffLimit, activeDeadlineSeconds and ttlSecondsAfterFinished."""

    primary = JOBS
    owns = {PODS: "Job"}

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        job = self.sim.get(JOBS, ns, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        if not job.get("spec", {}).get("selector") and not job.get("spec", {}).get("manualSelector"):
            job = self._default_selector(job)
        spec = job.get("spec", {})
        pods = self.sim.owned(PODS, job)
        succeeded = [p for p in pods if p.get("status", {}).get("phase") == "Succeeded"]
        failed = [p for p in pods if p.get("status", {}).get("phase") == "Failed"]
        active = [p for p in pods if kobj.pod_is_active(p)]
        status = copy.deepcopy(job.get("status") or {})
        now = self.sim.now()
        finished = job_finished(job)
        if finished:
            self._status(job, status, active, succeeded, failed)
            return
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
        backoff_limit = int(spec.get("backoffLimit", 6) if spec.get("backoffLimit") is not None else 6)
        indexed = spec.get("completionMode") == "Indexed"
        if spec.get("suspend"):
            for pod in active:
                self.sim.delete_pod(ns, pod["metadata"]["name"])
            kobj.set_condition(status, "Suspended", "True", now, "JobSuspended", "Job suspended")
            self._status(job, status, [], succeeded, failed)
            return
        if kobj.is_true(job, "Suspended"):
            kobj.set_condition(status, "Suspended", "False", now, "JobResumed", "Job resumed")
        status.setdefault("startTime", now)
        deadline = spec.get("activeDeadlineSeconds")
        started = kobj.parse_time(status.get("startTime"))
        if deadline is not None and started is not None and self.sim.clock.wall() - started >= float(deadline):
            self._fail(
                job,
                status,
                active,
                succeeded,
                failed,
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
            )
            return
        if deadline is not None and started is not None:
            remaining = float(deadline) - (self.sim.clock.wall() - started)
            self.sim.requeue(self, (ns, name), max(remaining, 0.0) + 0.01)
        # With restartPolicy OnFailure, failures are container restarts inside live pods (kube counts them).
        restarts = kobj.container_restarts(active)
        if len(failed) + restarts > backoff_limit:
            self._fail(
                job,
                status,
                active,
                succeeded,
                failed,
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
            return
        target = int(completions) if completions is not None else None
        done_indexes = {kobj.annotation(p, INDEX_ANNOTATION) for p in succeeded}
        if (target is not None and (len(done_indexes) if indexed else len(succeeded)) >= target) or (
            target is None and succeeded and not active
        ):
            for pod in active:
                self.sim.delete_pod(ns, pod["metadata"]["name"])
            kobj.set_condition(
                status,
                "SuccessCriteriaMet",
                "True",
                now,
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
            kobj.set_condition(
                status, "Complete", "True", now, "CompletionsReached", "Reached expected number of succeeded pods"
            )
            status["completionTime"] = now
            self._status(job, status, [], succeeded, failed)
            self.sim.event(job, "Completed", "Job completed", source="job-controller")
            self._ttl(job)
            return
        remaining_work = parallelism if target is None else min(parallelism, target - len(succeeded))
        missing = max(remaining_work - len(active), 0)
        if indexed and target is not None:
            busy = done_indexes | {kobj.annotation(p, INDEX_ANNOTATION) for p in active}
            free = [str(i) for i in range(target) if str(i) not in busy][:missing]
            for index in free:
                active.append(self._create_pod(job, len(failed), index))
        else:
            for _ in range(missing):
                active.append(self._create_pod(job, len(failed), None))
        self._status(job, status, [p for p in active if p], succeeded, failed)

    def _default_selector(self, job: Obj) -> Obj:
        """The selector and template labels the API server defaults on Jobs (`kubectl logs job/x` and
        `kubectl describe` find the pods through them), filled in when the server left them out."""
        uid = job["metadata"]["uid"]
        labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": job["metadata"]["name"]}
        job["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template_meta = job["spec"].setdefault("template", {}).setdefault("metadata", {})
        template_meta["labels"] = {
            **(template_meta.get("labels") or {}),
            **labels,
            "controller-uid": uid,
            "job-name": job["metadata"]["name"],
        }
        job["metadata"].pop("resourceVersion", None)
        updated: Obj = self.sim.update(JOBS, job)
        return updated

    def _create_pod(self, job: Obj, attempt: int, index: str | None) -> Obj:
        template = copy.deepcopy(job["spec"].get("template") or {})
        uid = job["metadata"]["uid"]
        labels = {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": job["metadata"]["name"],
            "controller-uid": uid,
            "job-name": job["metadata"]["name"],
        }
        annotations = {kobj.ATTEMPT: str(attempt)}
        if index is not None:
            annotations[INDEX_ANNOTATION] = index
            labels["batch.kubernetes.io/job-completion-index"] = index
            for container in (template.get("spec") or {}).get("containers") or []:
                container.setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "value": index})
        name = f"{job['metadata']['name']}-{index}-{kobj.random_suffix()}" if index is not None else None
        pod = kobj.pod_from_template(template, job, name=name, labels=labels, annotations=annotations)
        created = self.sim.create(PODS, pod)
        if created is None:
            return {}
        self.sim.event(job, "SuccessfulCreate", f"Created pod: {created['metadata']['name']}", source="job-controller")
        return created

    def _fail(
        self,
        job: Obj,
        status: Obj,
        active: list[Obj],
        succeeded: list[Obj],
        failed: list[Obj],
        reason: str,
        message: str,
    ) -> None:
        ns = job["metadata"]["namespace"]
        for pod in active:
            self.sim.delete_pod(ns, pod["metadata"]["name"])
        now = self.sim.now()
        kobj.set_condition(status, "FailureTarget", "True", now, reason, message)
        kobj.set_condition(status, "Failed", "True", now, reason, message)
        self._status(job, status, [], succeeded, failed)
        self.sim.event(job, reason, message, "Warning", source="job-controller")
        self._ttl(job)

    def _status(self, job: Obj, status: Obj, active: list[Obj], succeeded: list[Obj], failed: list[Obj]) -> None:
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if kobj.pod_is_ready(p))
        status["succeeded"] = len(succeeded)
        status["failed"] = len(failed)
        status["terminating"] = 0
        status["uncountedTerminatedPods"] = {}
        if job.get("spec", {}).get("completionMode") == "Indexed":
            done = sorted({int(kobj.annotation(p, INDEX_ANNOTATION, "0")) for p in succeeded})
            status["completedIndexes"] = ",".join(str(i) for i in done)
        for zero in ("active", "succeeded", "failed"):
            if status[zero] == 0:
                status.pop(zero)  # Kubernetes omits zero counts
        self.sim.patch_status(JOBS, job, status)

    def _ttl(self, job: Obj) -> None:
        ttl = job.get("spec", {}).get("ttlSecondsAfterFinished")
        if ttl is None:
            return
        ns, name, uid = job["metadata"]["namespace"], job["metadata"]["name"], job["metadata"]["uid"]

        def expire() -> None:
            current = self.sim.get(JOBS, ns, name)
            if current is None or current["metadata"]["uid"] != uid:
                return
            for pod in self.sim.owned(PODS, current):
                self.sim.delete_pod(ns, pod["metadata"]["name"])
            self.sim.delete(JOBS, ns, name)

        self.sim.after(float(ttl), expire)
