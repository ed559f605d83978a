"""The HorizontalPodAutoscaler controller (upstream ``pkg/controller/podautoscaler``).

``replica_calculator`` (proposals from metrics), ``behavior`` (stabilisation, policies,
clamping), ``horizontal`` (the reconcile loop), ``metrics`` (controller and state series).
The controller manager builds it from :func:`horizontal.new_controller`.
"""
