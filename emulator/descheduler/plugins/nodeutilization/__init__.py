"""LowNodeUtilization and HighNodeUtilization, sharing one classification (upstream ``plugins/nodeutilization``)."""
