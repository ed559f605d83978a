"""KEDA: event-driven autoscaling (kedacore/keda) — scalers, the scale handler and KEDA's metrics.

* :mod:`emulator.keda.scalers` — one module per trigger type behind one
  :class:`~emulator.keda.scalers.base.Scaler` interface (``pkg/scalers``);
* :mod:`emulator.keda.auth` — TriggerAuthentication resolution (``pkg/scaling/resolver``);
* :mod:`emulator.keda.formula` — ``advanced.scalingModifiers.formula`` (``pkg/scaling/modifiers``);
* :mod:`emulator.keda.metricstore` — the trigger metric values the operator's poll leaves
  for ``external.metrics.k8s.io`` (the metrics adapter's side of ``pkg/metricsservice``);
* :mod:`emulator.keda.prommetrics` — ``keda_*`` Prometheus series (``pkg/metricscollector``).

The operator (``controllers/keda``, ``pkg/scaling/scale_handler.go``) is :mod:`emulator.controllers.keda`.
"""
