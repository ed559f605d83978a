"""How many new nodes pending pods need (upstream ``estimator/``)."""
