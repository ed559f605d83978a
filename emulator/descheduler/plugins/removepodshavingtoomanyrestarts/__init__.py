"""RemovePodsHavingTooManyRestarts (upstream ``plugins/removepodshavingtoomanyrestarts``)."""
