"""RemovePodsViolatingNodeAffinity (upstream ``plugins/removepodsviolatingnodeaffinity``)."""
