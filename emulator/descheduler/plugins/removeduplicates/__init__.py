"""RemoveDuplicates (upstream ``plugins/removeduplicates``)."""
