"""RemovePodsViolatingInterPodAntiAffinity (upstream ``plugins/removepodsviolatinginterpodantiaffinity``)."""
