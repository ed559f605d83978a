"""KEDA's operator (kedacore/keda ``controllers/keda``): the ScaledObject and ScaledJob reconcilers and their scale
loops, on one scale handler (``scalehandler``: ``pkg/scaling/scale_handler.go``)."""
