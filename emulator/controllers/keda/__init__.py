"""KEDA's operator (kedacore/keda ``controllers/keda``): the ScaledObject reconciler and its scale loops."""
