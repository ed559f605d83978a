"""Scheduling and drain simulation on cluster snapshots (upstream ``simulator/``)."""
