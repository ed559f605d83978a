"""Load-aware scheduling: the dynamic scheduler's policy, node-load annotations and hot values.

Managed Kubernetes' "dynamic scheduler" (Tencent TKE; open-sourced as
gocrane/crane-scheduler's ``Dynamic`` plugin) schedules on *measured* node
load instead of requests: a node annotator writes utilization windows
(``cpu_usage_avg_5m`` ... ``mem_usage_max_avg_1d``) and a hot value into
Node annotations; a scheduler plugin or extender filters and scores on them.
kemu's parts:

* :mod:`.policy` -- the ``DynamicSchedulerPolicy`` (syncPolicy, predicate,
  priority, hotValue), the annotation format, and the filter/score formulas,
  vectorised over nodes (pure: numpy only; the scheduler imports it);
* :mod:`.hotvalue` -- recent bindings per node (the hot value's input);
* :mod:`.history` -- the annotator's short usage history in Redis;
* :mod:`.extender_server` -- the same filter/score as an HTTP scheduler extender.

The annotator itself is the controller :mod:`emulator.controllers.nodeannotator`;
the in-process plugin is :mod:`emulator.scheduler.plugins.load_aware`.
"""
