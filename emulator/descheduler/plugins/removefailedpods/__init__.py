"""RemoveFailedPods (upstream ``plugins/removefailedpods``)."""
