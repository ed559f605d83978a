"""RemovePodsViolatingNodeTaints (upstream ``plugins/removepodsviolatingnodetaints``)."""
