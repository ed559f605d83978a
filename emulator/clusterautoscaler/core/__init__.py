"""The two halves of the Cluster Autoscaler and the scan that runs them (upstream ``core/``)."""
