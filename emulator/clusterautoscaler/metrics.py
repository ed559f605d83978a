"""The Cluster Autoscaler's metrics under upstream's names (``cluster-autoscaler/metrics/metrics.go``).

Names, types and labels as upstream registers them (namespace
``cluster_autoscaler``); per-node-group gauges are upstream's
``--emit-per-nodegroup-metrics`` set. ``kemu_cloud_node_group_cost_per_hour``
is kemu's own: running nodes of a group times its price (the emulated cloud's
bill), for the cost panels.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

UNSCHEDULABLE_PODS = Gauge("cluster_autoscaler_unschedulable_pods_count",
                           "Number of unschedulable pods in the cluster.", ["type"])
NODES = Gauge("cluster_autoscaler_nodes_count", "Number of nodes in cluster.", ["state"])
NODE_GROUPS = Gauge("cluster_autoscaler_node_groups_count", "Number of node groups managed by CA.",
                    ["node_group_type"])
SCALED_UP = Counter("cluster_autoscaler_scaled_up_nodes_total", "Number of nodes added by CA.")
SCALED_DOWN = Counter("cluster_autoscaler_scaled_down_nodes_total", "Number of nodes removed by CA.", ["reason"])
FAILED_SCALE_UPS = Counter("cluster_autoscaler_failed_scale_ups_total",
                           "Number of times scale-up operation has failed.", ["reason"])
UNNEEDED = Gauge("cluster_autoscaler_unneeded_nodes_count",
                 "Number of nodes currently considered unneeded by CA.")
FUNCTION_DURATION = Histogram("cluster_autoscaler_function_duration_seconds",
                              "Time taken by various parts of CA main loop.", ["function"],
                              buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 7.5, 10.0, 12.5, 15.0, 17.5, 20.0,
                                       22.5, 25.0, 27.5, 30.0, 50.0, 75.0, 100.0, 1000.0))
LAST_ACTIVITY = Gauge("cluster_autoscaler_last_activity", "Last time certain part of CA logic executed.",
                      ["activity"])
GROUP_TARGET = Gauge("cluster_autoscaler_node_group_target_count", "Target number of nodes in the node group by CA.",
                     ["node_group"])
GROUP_MIN = Gauge("cluster_autoscaler_node_group_min_count", "Minimum number of nodes in the node group",
                  ["node_group"])
GROUP_MAX = Gauge("cluster_autoscaler_node_group_max_count", "Maximum number of nodes in the node group",
                  ["node_group"])
GROUP_COST = Gauge("kemu_cloud_node_group_cost_per_hour",
                   "Registered nodes of the node group times its price per hour (the emulated cloud's bill).",
                   ["node_group"])

# The reasons kemu's autoscaler counts, created at 0 so a dashboard's ``increase(...)`` has a series before the
# first scale-down or failure (a labelled child exists only once touched).
for _reason in ("empty", "underutilized"):
    SCALED_DOWN.labels(_reason)
for _reason in ("timeout", "cloudProviderError"):
    FAILED_SCALE_UPS.labels(_reason)
