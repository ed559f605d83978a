"""The Vertical Pod Autoscaler: recommender, updater (controllers here) and admission (emulator.server.admission).

Upstream runs three binaries (kubernetes/autoscaler ``vertical-pod-autoscaler``);
kemu runs the recommender and the updater as controllers of the controller
manager (``vpa-recommender``, ``vpa-updater``) and the admission controller as a
mutating admission plugin of the API server. Their shared semantics live in
:mod:`emulator.api.vpa`.
"""
