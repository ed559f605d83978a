"""The metrics APIs the autoscalers read: resource (``metrics.k8s.io``), custom and external.

Upstream, the HPA never reads Prometheus or the kubelet: it calls the
aggregated metrics APIs through the four methods of
``pkg/controller/podautoscaler/metrics/interfaces.go``'s ``MetricsClient``.
:mod:`emulator.metricsapi.client` declares that seam; implementations live in
this package beside the API providers they read, and the controller manager
injects one into the controllers that need it.
"""
