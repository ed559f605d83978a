"""The descheduler's Prometheus metrics, with upstream's names (``pkg/descheduler/metrics/metrics.go``).

``descheduler_pods_evicted`` counts eviction attempts by ``result`` (``success``,
``error``, or the limit that stopped it), ``strategy`` (the plugin),
``namespace``, ``node`` and ``profile``; prometheus-client exposes a counter
with the ``_total`` suffix (``descheduler_pods_evicted_total``, the name
upstream's newer releases use). The two histograms time one descheduling loop
and each plugin's run, in wall seconds: they measure our code.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250)

PODS_EVICTED = Counter("descheduler_pods_evicted",
                       "Number of evicted pods, by the result, by the strategy, by the namespace, by the node name.",
                       ["result", "strategy", "profile", "namespace", "node"])
LOOP_DURATION = Histogram("descheduler_descheduler_loop_duration_seconds",
                          "Time taken to complete a full descheduling cycle", ["type"], buckets=_BUCKETS)
STRATEGY_DURATION = Histogram("descheduler_descheduler_strategy_duration_seconds",
                              "Time taken to complete Each strategy of the descheduling operation",
                              ["strategy", "profile"], buckets=_BUCKETS)
