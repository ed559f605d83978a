"""PodLifeTime (upstream ``plugins/podlifetime``)."""
