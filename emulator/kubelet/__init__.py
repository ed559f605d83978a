"""The kubelet's resource model: pure, vectorised, deterministic.

Everything here is plain Python over numpy arrays, with no I/O, no Redis and
no Ray, so a kubelet shard (a Ray actor hosting thousands of nodes, see
``actors/``) can drive one tick of every container it hosts with a handful of
array operations, and tests can drive the same code with explicit times.

* :mod:`emulator.kubelet.profiles` — pod behaviour as data (startup delay,
  CPU / memory / ephemeral-storage / pid curves, run duration, exit code),
  chosen per pod by annotation, evaluated for all containers at once.
* :mod:`emulator.kubelet.cgroups` — cgroup v2 accounting for a tick: CFS
  quota/period throttling, CPU weight sharing under contention, memory.high
  pressure, memory.max OOM kills, oom_score_adj and the node-level OOM killer.
* :mod:`emulator.kubelet.eviction` — the eviction manager: thresholds,
  signals, node pressure conditions, pod ranking, eviction messages.
* :mod:`emulator.kubelet.restarts` — restartPolicy and CrashLoopBackOff.
* :mod:`emulator.kubelet.model` — the façade a shard drives: pods and nodes
  in, one ``tick(now)`` per period, events and pod statuses out.

Around the model, :mod:`emulator.kubelet.shard` runs the kubelets of many nodes
against the API server, composing one module per pkg/kubelet manager:
:mod:`~emulator.kubelet.nodestatus`, :mod:`~emulator.kubelet.nodelease`,
:mod:`~emulator.kubelet.admission`, :mod:`~emulator.kubelet.pod_workers`,
:mod:`~emulator.kubelet.images`, :mod:`~emulator.kubelet.pod_status`,
:mod:`~emulator.kubelet.status_manager`, :mod:`~emulator.kubelet.usage_publisher`.
"""
