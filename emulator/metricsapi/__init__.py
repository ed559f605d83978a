"""The metrics APIs the autoscalers read: resource (``metrics.k8s.io``), custom and external.

Upstream, the HPA never reads Prometheus or the kubelet: it calls the
aggregated metrics APIs through the four methods of
``pkg/controller/podautoscaler/metrics/interfaces.go``'s ``MetricsClient``.
:mod:`emulator.metricsapi.client` declares that seam; implementations live in
this package beside the API providers they read, and the controller manager
injects one into the controllers that need it.

Custom and external metrics: :mod:`.rules` (prometheus-adapter's rules
schema; the default ``rules.yaml``), :mod:`.series` (kemu's own series or a
real Prometheus), :mod:`.adapter` (``custom.metrics.k8s.io/v1beta2`` and
``external.metrics.k8s.io/v1beta1`` as the API server serves them) and
:mod:`.custom` (the ``MetricsClient`` over that adapter;
:func:`.custom.metrics_client` builds a complete one).
"""
