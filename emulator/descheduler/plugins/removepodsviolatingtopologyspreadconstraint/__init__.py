"""RemovePodsViolatingTopologySpreadConstraint (upstream ``plugins/removepodsviolatingtopologyspreadconstraint``)."""
