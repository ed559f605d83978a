"""kemu's Grafana dashboards: a small spec here, JSON in ``dashboards/``, and ``kemu dashboards push``.

The dashboards (scheduler, cluster, kubelets, API server, autoscaling, GPUs) are written as data
-- rows of :class:`Panel`, each a title, a unit and PromQL expressions -- and
:func:`build` turns them into Grafana dashboard JSON (schema 39, Grafana 10/11):
one ``datasource`` template variable (default: the provisioned data source
uid ``prometheus``) that every panel and query uses, label_values variables
where a dashboard filters (``scheduler``, ``profile``, ``hpa``, ``scaledobject``), and a grid layout
computed from the rows. ``python -m emulator.dashboards`` writes
``dashboards/*.json``; a test checks the committed files equal what this
module generates, and the real-Prometheus test runs every expression of every
committed panel against a live cluster, so a renamed metric fails a test
instead of leaving an empty panel.

:func:`push` uploads the dashboards to a Grafana through ``grafana-client``
(folder created when missing, dashboards overwritten), for ``kemu dashboards
push``. Errors become :class:`PushError` with one line saying what failed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATASOURCE_UID = "prometheus"
DASHBOARDS_DIR = Path(__file__).resolve().parent.parent / "dashboards"
_DS = {"type": "prometheus", "uid": "${datasource}"}
_WIDTH = 24


@dataclass(frozen=True)
class Target:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    title: str
    targets: tuple[Target, ...]
    unit: str = "short"
    kind: str = "timeseries"  # timeseries | heatmap | stat
    description: str = ""
    stack: bool = False
    legend: bool = True


@dataclass(frozen=True)
class Variable:
    name: str
    query: str  # label_values(...) query
    label: str = ""


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    file: str
    rows: tuple[tuple[Panel, ...], ...]
    variables: tuple[Variable, ...] = ()
    description: str = ""
    tags: tuple[str, ...] = field(default=("kemu",))


def q(quantile: float, metric: str, by: str = "", selector: str = "") -> str:
    """``histogram_quantile`` of a histogram's rate, summed by ``le`` plus ``by``."""
    labels = ", ".join(x for x in ("le", by) if x)
    return f"histogram_quantile({quantile}, sum by ({labels}) (rate({metric}_bucket{selector}[$__rate_interval])))"


def quantiles(metric: str, selector: str = "", by: str = "", qs: tuple[float, ...] = (0.5, 0.9, 0.99)) -> tuple[
        Target, ...]:
    suffix = f" {{{{{by}}}}}" if by else ""
    return tuple(Target(q(x, metric, by, selector), f"p{round(x * 100)}{suffix}") for x in qs)


def rate(metric: str, selector: str = "", by: str = "") -> str:
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} (rate({metric}{selector}[$__rate_interval]))"


# ------------------------------------------------------------------------------------------ the dashboards

_S = '{scheduler=~"$scheduler"}'
_SP = '{scheduler=~"$scheduler", profile=~"$profile"}'

SCHEDULER = Dashboard(
    "kemu-scheduler", "kemu / Scheduler", "scheduler.json",
    description="Competing kemu schedulers: latency, throughput, outcomes, queues, Omega-style conflicts, "
                "preemption and per-plugin cost (upstream kube-scheduler metric names).",
    variables=(Variable("scheduler", "label_values(scheduler_schedule_attempts_total, scheduler)", "Scheduler"),
               Variable("profile", 'label_values(scheduler_schedule_attempts_total{scheduler=~"$scheduler"}, profile)',
                        "Profile")),
    rows=(
        (Panel("Pod scheduling SLI latency", quantiles("scheduler_pod_scheduling_sli_duration_seconds", _S), "s",
               description="From the pod entering the queue to bound, across attempts (p50/p90/p99)."),
         Panel("Scheduling attempt latency by result (p99)",
               (Target(q(0.99, "scheduler_scheduling_attempt_duration_seconds", "result", _SP), "{{result}}"),),
               "s")),
        (Panel("Throughput (pods scheduled/s)",
               (Target(rate("scheduler_schedule_attempts_total",
                            '{result="scheduled", scheduler=~"$scheduler", profile=~"$profile"}', "scheduler"),
                       "{{scheduler}}"),), "ops"),
         Panel("Attempts by result", (Target(rate("scheduler_schedule_attempts_total", _SP, "result"),
                                             "{{result}}"),), "ops", stack=True)),
        (Panel("Pending pods by queue", (Target('sum by (queue) (scheduler_pending_pods{scheduler=~"$scheduler"})',
                                                "{{queue}}"),), stack=True),
         Panel("Incoming pods by queue and event",
               (Target(rate("scheduler_queue_incoming_pods_total", _S, "queue, event"), "{{queue}} {{event}}"),),
               "ops")),
        (Panel("Bind conflicts per scheduler",
               (Target(rate("scheduler_bind_conflicts_total", _S, "scheduler"), "{{scheduler}}"),), "ops",
               description="Binds the store refused with 409: the optimistic-concurrency losses."),
         Panel("Assumed pods forgotten per scheduler",
               (Target(rate("scheduler_assumed_forgotten_total", _S, "scheduler, reason"),
                       "{{scheduler}} {{reason}}"),), "ops")),
        (Panel("Preemption attempts", (Target(rate("scheduler_preemption_attempts_total", _S, "scheduler"),
                                              "{{scheduler}}"),), "ops"),
         Panel("Preemption victims", (
             Target(rate("scheduler_preemption_victims_sum", _S, "scheduler"), "victims/s {{scheduler}}"),
             Target(q(0.9, "scheduler_preemption_victims", "scheduler", _S), "p90 per preemption {{scheduler}}")))),
        (Panel("Extension point duration (p99)",
               (Target(q(0.99, "scheduler_framework_extension_point_duration_seconds", "extension_point", _SP),
                       "{{extension_point}}"),), "s"),
         Panel("Plugin execution duration (p99)",
               (Target(q(0.99, "scheduler_plugin_execution_duration_seconds", "plugin", _S), "{{plugin}}"),), "s")),
        (Panel("Cache staleness",
               (Target('max by (scheduler) (scheduler_cache_staleness_seconds{scheduler=~"$scheduler"})',
                       "{{scheduler}}"),), "s",
               description="Age of the newest informer event the scheduler cache applied."),
         Panel("Cache size", (Target('sum by (type) (scheduler_cache_size{scheduler=~"$scheduler"})', "{{type}}"),))),
    ))

CLUSTER = Dashboard(
    "kemu-cluster", "kemu / Cluster", "cluster.json",
    description="Cluster state (counts from the controller manager's informers), pod startup latency, and "
                "requested vs allocatable vs used resources per node (from the kubelet shards).",
    rows=(
        (Panel("Nodes by condition (status true)",
               (Target('sum by (condition) (kemu_cluster_nodes{status="true"})', "{{condition}}"),
                Target('sum(kemu_cluster_nodes{condition="Ready", status!="true"})', "not Ready"),
                Target("sum(kemu_cluster_nodes_unschedulable)", "cordoned"))),
         Panel("Pods by phase", (Target("sum by (phase) (kemu_cluster_pods)", "{{phase}}"),
                                 Target("sum(kemu_cluster_pods_unscheduled)", "Pending, unscheduled")),
               stack=False)),
        (Panel("Pod startup latency", quantiles("kubelet_pod_start_sli_duration_seconds"), "s",
               description="Pod creation to all containers started, as the kubelet measures it."),
         Panel("Cluster CPU: allocatable, requested, used",
               (Target('sum(kube_node_status_allocatable{resource="cpu"})', "allocatable"),
                Target('sum(kemu_node_resource_requests{resource="cpu"})', "requested"),
                Target("sum(rate(container_cpu_usage_seconds_total[$__rate_interval]))", "used")), "cores")),
        (Panel("Requested vs used CPU per node",
               (Target('sum by (node) (kemu_node_resource_requests{resource="cpu"})', "requested {{node}}"),
                Target("sum by (node) (rate(container_cpu_usage_seconds_total[$__rate_interval]))", "used {{node}}")),
               "cores", legend=False),
         Panel("Requested vs used memory per node",
               (Target('sum by (node) (kemu_node_resource_requests{resource="memory"})', "requested {{node}}"),
                Target("sum by (node) (container_memory_working_set_bytes)", "used {{node}}")),
               "bytes", legend=False)),
        (Panel("CPU allocation per node (requested / allocatable)",
               (Target('sum by (node) (kemu_node_resource_requests{resource="cpu"}) / '
                       'sum by (node) (kube_node_status_allocatable{resource="cpu"})', "{{node}}"),),
               "percentunit", kind="heatmap",
               description="How full the nodes are: each column is a histogram of the nodes' CPU allocation."),
         Panel("Memory allocation per node (requested / allocatable)",
               (Target('sum by (node) (kemu_node_resource_requests{resource="memory"}) / '
                       'sum by (node) (kube_node_status_allocatable{resource="memory"})', "{{node}}"),),
               "percentunit", kind="heatmap")),
        (Panel("Controller work queue depth", (Target("sum by (name) (workqueue_depth)", "{{name}}"),)),
         Panel("Controller reconciles", (Target(rate("controller_runtime_reconcile_total", "", "controller"),
                                                "{{controller}}"),), "ops")),
    ))

KUBELETS = Dashboard(
    "kemu-kubelets", "kemu / Kubelets", "kubelets.json",
    description="The emulated kubelets: OOM kills, CFS throttling, evictions, node pressure, shard health "
                "(container_* series are summed per node).",
    rows=(
        (Panel("OOM kills", (Target(rate("container_oom_events_total", "", "shard"), "shard {{shard}}"),), "ops"),
         Panel("Evictions by signal", (Target(rate("kubelet_evictions", "", "eviction_signal"),
                                              "{{eviction_signal}}"),), "ops")),
        (Panel("CFS throttled periods (fraction)",
               (Target("sum(rate(container_cpu_cfs_throttled_periods_total[$__rate_interval])) / "
                       "sum(rate(container_cpu_cfs_periods_total[$__rate_interval]))", "throttled"),),
               "percentunit"),
         Panel("CFS throttled time", (Target(rate("container_cpu_cfs_throttled_seconds_total", "", "shard"),
                                             "shard {{shard}}"),), "s")),
        (Panel("Nodes under pressure", (Target('sum by (condition) (kemu_cluster_nodes{condition=~".*Pressure", '
                                               'status="true"})', "{{condition}}"),)),
         Panel("Running pods per shard", (Target("sum by (shard) (kubelet_running_pods)", "shard {{shard}}"),),
               stack=True)),
        (Panel("Shard tick duration (p99)", (Target(q(0.99, "kemu_kubelet_tick_duration_seconds", "instance"),
                                                    "{{instance}}"),), "s"),
         Panel("Lease renewals", (Target(rate("kemu_kubelet_lease_renewals_total", "", "shard"), "shard {{shard}}"),),
               "ops")),
    ))

APISERVER = Dashboard(
    "kemu-apiserver", "kemu / API server", "apiserver.json",
    description="The Kubernetes API server: requests by verb, resource and code, latency, watches.",
    rows=(
        (Panel("Requests by verb and resource", (Target(rate("apiserver_request_total", "", "verb, resource"),
                                                        "{{verb}} {{resource}}"),), "reqps", stack=True),
         Panel("Requests by code", (Target(rate("apiserver_request_total", "", "code"), "{{code}}"),), "reqps",
               stack=True)),
        (Panel("Request latency by verb (p99)",
               (Target(q(0.99, "apiserver_request_duration_seconds", "verb"), "{{verb}}"),), "s"),
         Panel("Request latency by verb (p50)",
               (Target(q(0.5, "apiserver_request_duration_seconds", "verb"), "{{verb}}"),), "s")),
        (Panel("Open watches", (Target('sum by (resource) (apiserver_longrunning_requests{verb="WATCH"})',
                                       "{{resource}}"),)),
         Panel("Watch events sent", (Target(rate("apiserver_watch_events_total", "", "resource"), "{{resource}}"),),
               "ops")),
        (Panel("Watch lag (resourceVersions behind newest, p99)",
               (Target(q(0.99, "kemu_apiserver_watch_lag_resource_versions", "resource"), "{{resource}}"),),
               description="Per batch of watch events: the newest resourceVersion when read minus the batch's "
                           "last event's (see docs/metrics.md)."),
         Panel("Watch lag (p50)", (Target(q(0.5, "kemu_apiserver_watch_lag_resource_versions", "resource"),
                                          "{{resource}}"),))),
    ))

_H = '{horizontalpodautoscaler=~"$hpa"}'
_HPA_BY = "namespace, horizontalpodautoscaler"
_METRIC_BY = f"{_HPA_BY}, metric_name, metric_target_type"
_VPA_BY = "namespace, verticalpodautoscaler, container"


def _vpa_panel(resource: str, unit: str) -> Panel:
    """Recommendation (target and bounds) against what the VPA's pods request now, for one resource."""
    sel = f'{{resource="{resource}"}}'
    rec = "kube_verticalpodautoscaler_status_recommendation_containerrecommendations_"
    return Panel(f"VPA {resource}: recommendation vs requests",
                 (Target(f"max by ({_VPA_BY}) ({rec}target{sel})", "target {{verticalpodautoscaler}}/{{container}}"),
                  Target(f"max by ({_VPA_BY}) ({rec}lowerbound{sel})", "lower {{verticalpodautoscaler}}/{{container}}"),
                  Target(f"max by ({_VPA_BY}) ({rec}upperbound{sel})", "upper {{verticalpodautoscaler}}/{{container}}"),
                  Target(f"max by ({_VPA_BY}) (kemu_verticalpodautoscaler_container_resource_requests{sel})",
                         "requests {{verticalpodautoscaler}}/{{container}}")), unit,
                 description="The recommender's target and bounds (kube-state-metrics' VPA series) against the "
                             "mean request of the pods it controls: Auto/Recreate modes evict pods outside the "
                             "bounds, and admission gives new pods the target.")


_SO = '{type="scaledobject", scaledObject=~"$scaledobject"}'
_SCALER_BY = "namespace, scaledObject, scaler, metric"
# KEDA (kedacore/keda pkg/metricscollector/prommetrics.go names): a ScaledObject's trigger values against the
# replicas of the HPA it owns (keda-hpa-<name>: the $scaledobject filter applies to both), activity, errors, lateness.
_KEDA_ROWS = (
    (Panel("KEDA: queue depth vs replicas per ScaledObject",
           (Target(f"max by ({_SCALER_BY}) (keda_scaler_metrics_value{_SO})", "{{scaledObject}} {{metric}}"),
            Target(f"max by ({_HPA_BY}) (kube_horizontalpodautoscaler_status_current_replicas"
                   '{horizontalpodautoscaler=~"keda-hpa-$scaledobject"})', "replicas {{horizontalpodautoscaler}}")),
           description="Each trigger's metric value as the last poll read it (a redis trigger: the list's length) "
                       "and the replicas of the HPA the ScaledObject owns; KEDA itself scales 0 <-> 1, the HPA "
                       "1 <-> max."),
     Panel("KEDA: active scalers (keda_scaler_active)",
           (Target(f"max by ({_SCALER_BY}) (keda_scaler_active{_SO})", "{{scaledObject}} {{scaler}} {{metric}}"),),
           description="1 while a trigger is above its activation threshold: what wakes a target at 0.")),
    (Panel("KEDA: scaler errors (keda_scaler_errors_total)",
           (Target(rate("keda_scaler_errors_total", _SO, _SCALER_BY), "{{scaledObject}} {{scaler}} {{metric}}"),),
           "ops", description="Failed reads per second; fallback applies after fallback.failureThreshold of them "
                              "in a row."),
     Panel("KEDA: scale loop lateness",
           (Target('max by (namespace, type, resource) (keda_internal_scale_loop_latency_seconds)',
                   "{{type}} {{namespace}}/{{resource}}"),), "s",
           description="How late each ScaledObject's or ScaledJob's last poll started against when it was due "
                       "(cluster seconds).")),
)

AUTOSCALING = Dashboard(
    "kemu-autoscaling", "kemu / Autoscaling", "autoscaling.json",
    description="Horizontal and vertical pod autoscaling: each HPA's desired vs current replicas against the load "
                "offered to the load targets, each metric against its target, the HPA controller's work, "
                "each VPA's recommendation against what its pods request, KEDA's ScaledObjects (queue depth "
                "vs replicas, active scalers, scaler errors, scale loop lateness), and the Cluster Autoscaler's "
                "node groups, pending pods, scale events and cost per hour.",
    variables=(Variable("hpa", "label_values(kube_horizontalpodautoscaler_status_desired_replicas, "
                               "horizontalpodautoscaler)", "HPA"),
               Variable("scaledobject", "label_values(keda_scaler_metrics_value, scaledObject)", "ScaledObject")),
    rows=(
        (Panel("Replicas per HPA: desired vs current",
               (Target(f"max by ({_HPA_BY}) (kube_horizontalpodautoscaler_status_desired_replicas{_H})",
                       "desired {{horizontalpodautoscaler}}"),
                Target(f"max by ({_HPA_BY}) (kube_horizontalpodautoscaler_status_current_replicas{_H})",
                       "current {{horizontalpodautoscaler}}"),
                Target(f"max by ({_HPA_BY}) (kube_horizontalpodautoscaler_spec_max_replicas{_H})",
                       "max {{horizontalpodautoscaler}}"))),
         Panel("Load: offered per target vs served per namespace",
               (Target("max by (target) (kemu_loadgen_http_requests_per_second)", "offered {{target}}"),
                Target("sum by (namespace) (http_requests_per_second)", "served {{namespace}}")), "reqps",
               description="Offered: the request rate of each load target (a scenario's load phase or kemu load "
                           "set, as the load driver exports it). Served: the per-pod http_requests_per_second "
                           "the kubelets export, summed.")),
        (Panel("HPA metrics: current vs target",
               (Target(f"max by ({_METRIC_BY}) (kube_horizontalpodautoscaler_status_target_metric{_H})",
                       "{{horizontalpodautoscaler}} {{metric_name}} ({{metric_target_type}})"),
                Target(f"max by ({_METRIC_BY}) (kube_horizontalpodautoscaler_spec_target_metric{_H})",
                       "target {{horizontalpodautoscaler}} {{metric_name}} ({{metric_target_type}})"))),
         Panel("HPA metrics: current / target (1 = on target)",
               (Target(f"max by ({_METRIC_BY}) (kube_horizontalpodautoscaler_status_target_metric{_H}) / "
                       f"max by ({_METRIC_BY}) (kube_horizontalpodautoscaler_spec_target_metric{_H})",
                       "{{horizontalpodautoscaler}} {{metric_name}}"),),
               description="The usage ratio the replica calculator scales by; within 0.9-1.1 (the tolerance) "
                           "the HPA keeps its count.")),
        (Panel("HPA reconciles by action",
               (Target(rate("horizontal_pod_autoscaler_controller_reconciliations_total", "", "action, error"),
                       "{{action}} {{error}}"),), "ops", stack=True),
         Panel("HPA reconcile and metric computation latency (p99)",
               (Target(q(0.99, "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds"), "reconcile"),
                Target(q(0.99, "horizontal_pod_autoscaler_controller_metric_computation_duration_seconds",
                         "metric_type"), "{{metric_type}} metric")), "s")),
        (_vpa_panel("cpu", "cores"), _vpa_panel("memory", "bytes")),
        *_KEDA_ROWS,
        (Panel("Cluster Autoscaler: nodes per node group",
               (Target("max by (node_group) (cluster_autoscaler_node_group_target_count)", "target {{node_group}}"),
                Target("max by (node_group) (cluster_autoscaler_node_group_min_count)", "min {{node_group}}"),
                Target("max by (node_group) (cluster_autoscaler_node_group_max_count)", "max {{node_group}}"),
                Target("max by (state) (cluster_autoscaler_nodes_count)", "all nodes {{state}}")),
               description="Each node group's target size (registered plus upcoming nodes) between its min and "
                           "max, and the cluster's nodes by readiness as the autoscaler counts them (kemu up "
                           "--node-groups)."),
         Panel("Cluster Autoscaler: pending (unschedulable) pods and unneeded nodes",
               (Target("max by (type) (cluster_autoscaler_unschedulable_pods_count)", "pending pods ({{type}})"),
                Target("max(cluster_autoscaler_unneeded_nodes_count)", "unneeded nodes")),
               description="Pods the scheduler marked Unschedulable that the autoscaler considered at its last "
                           "scan (nominated and expendable pods left out), and nodes found unneeded (scale-down "
                           "candidates waiting out scale-down-unneeded-time).")),
        (Panel("Cluster Autoscaler: scale-up and scale-down events",
               (Target("sum(increase(cluster_autoscaler_scaled_up_nodes_total[$__rate_interval]))", "nodes added"),
                Target("sum by (reason) (increase(cluster_autoscaler_scaled_down_nodes_total[$__rate_interval]))",
                       "nodes removed ({{reason}})"),
                Target("sum by (reason) (increase(cluster_autoscaler_failed_scale_ups_total[$__rate_interval]))",
                       "failed scale-ups ({{reason}})")), stack=False,
               description="Nodes the autoscaler added or removed per interval, and failed scale-ups "
                           "(cloud provider errors such as an out-of-quota group, instances that never came up)."),
         Panel("Cluster Autoscaler: cost per hour",
               (Target("sum by (node_group) (kemu_cloud_node_group_cost_per_hour)", "{{node_group}}"),),
               "currencyUSD", stack=True,
               description="Registered nodes of each node group times its price_per_hour: the emulated cloud's "
                           "bill rate (stacked: the top is the cluster's).")),
    ))

GPU = Dashboard(
    "kemu-gpu", "kemu / GPUs", "gpu.json",
    description="GPU devices and GPU sharing: the FGD paper's allocation and fragmentation measures from the "
                "scheduler's per-device view, and DCGM-exporter-style per-device series from the kubelets' device "
                "managers (utilization and framebuffer memory follow the allocated shares).",
    rows=(
        (Panel("GPU allocation (allocated / capacity)",
               (Target("max(kemu_gpu_allocation_ratio)", "cluster"),
                Target("max by (model) (kemu_gpu_model_allocation_ratio)", "{{model}}")), "percentunit",
               description="Allocated milli-GPU over the cluster's GPU capacity (the paper's GPU allocation "
                           "ratio), overall and per GPU model, as the scheduler's cache sees it."),
         Panel("GPU fragmentation",
               (Target("max by (of) (kemu_gpu_fragmentation_ratio)", "of {{of}} GPUs"),), "percentunit",
               description="Fragmented GPUs - the free GPU the target workload (the task types of the pods in the "
                           "cache) cannot use, F(M) summed over nodes - as a fraction of all GPUs and of the idle "
                           "ones.")),
        (Panel("Fragmented and idle GPUs",
               (Target("max(kemu_gpu_fragmented_gpus)", "fragmented"),
                Target("sum(1000 - kemu_gpu_device_allocated_milli) / 1000", "idle (device managers)")), "short",
               description="In GPUs: fragmented (scheduler) against idle (1000 milli per device minus what the "
                           "kubelets' device managers allocated)."),
         Panel("Allocated milli-GPU per node",
               (Target("sum by (Hostname) (kemu_gpu_device_allocated_milli)", "{{Hostname}}"),), "short",
               legend=False, description="What the kubelet device managers gave pods, per node (1000 per whole "
                                         "device).")),
        (Panel("GPU utilization per device (DCGM_FI_DEV_GPU_UTIL)",
               (Target("max by (Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL)", "{{Hostname}}/{{gpu}}"),), "percent",
               kind="heatmap", description="Each column is a histogram of the devices' utilization (%): a device "
                                           "is as busy as the shares allocated on it."),
         Panel("Mean GPU utilization by model",
               (Target("avg by (modelName) (DCGM_FI_DEV_GPU_UTIL)", "{{modelName}}"),), "percent")),
        (Panel("Framebuffer memory used by model (DCGM_FI_DEV_FB_USED)",
               (Target("sum by (modelName) (DCGM_FI_DEV_FB_USED)", "{{modelName}}"),), "mbytes", stack=True),
         Panel("Devices by model", (Target("count by (modelName) (DCGM_FI_DEV_GPU_UTIL)", "{{modelName}}"),),
               stack=True)),
    ))

DASHBOARDS = (SCHEDULER, CLUSTER, KUBELETS, APISERVER, AUTOSCALING, GPU)


# ------------------------------------------------------------------------------------------ JSON


def _panel(panel: Panel, pid: int, grid: dict[str, int]) -> dict[str, Any]:
    targets = [{"refId": chr(ord("A") + i), "datasource": _DS, "expr": t.expr, "legendFormat": t.legend or "__auto",
                "range": True, "editorMode": "code"} for i, t in enumerate(panel.targets)]
    out: dict[str, Any] = {"id": pid, "type": panel.kind, "title": panel.title, "datasource": _DS,
                           "gridPos": grid, "targets": targets}
    if panel.description:
        out["description"] = panel.description
    if panel.kind == "heatmap":
        out["fieldConfig"] = {"defaults": {"unit": panel.unit}, "overrides": []}
        out["options"] = {"calculate": True, "calculation": {"yBuckets": {"mode": "count", "value": "10"}},
                          "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64},
                          "yAxis": {"unit": panel.unit}, "cellGap": 1, "legend": {"show": True},
                          "tooltip": {"mode": "single", "yHistogram": True}}
        return out
    custom: dict[str, Any] = {"lineWidth": 1, "fillOpacity": 20 if panel.stack else 0, "showPoints": "never",
                              "spanNulls": True}
    if panel.stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    out["fieldConfig"] = {"defaults": {"unit": panel.unit, "custom": custom}, "overrides": []}
    out["options"] = {"legend": {"showLegend": panel.legend, "displayMode": "list", "placement": "bottom"},
                      "tooltip": {"mode": "multi", "sort": "desc"}}
    return out


def _variable(var: Variable) -> dict[str, Any]:
    return {"name": var.name, "label": var.label or var.name, "type": "query", "datasource": _DS,
            "definition": var.query, "query": {"query": var.query, "refId": f"{var.name}-values"},
            "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*", "sort": 1,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "hide": 0}


def build(dash: Dashboard) -> dict[str, Any]:
    """The Grafana JSON model of ``dash``."""
    panels: list[dict[str, Any]] = []
    y = 0
    for row in dash.rows:
        w = _WIDTH // len(row)
        h = 8
        for i, panel in enumerate(row):
            panels.append(_panel(panel, len(panels) + 1, {"h": h, "w": w, "x": i * w, "y": y}))
        y += h
    datasource = {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
                  "current": {"selected": True, "text": "Prometheus", "value": DATASOURCE_UID}, "hide": 0,
                  "refresh": 1, "regex": "", "includeAll": False, "multi": False}
    return {
        "uid": dash.uid, "title": dash.title, "description": dash.description, "tags": list(dash.tags),
        "editable": True, "graphTooltip": 1, "refresh": "10s", "schemaVersion": 39, "version": 1,
        "time": {"from": "now-30m", "to": "now"}, "timepicker": {}, "timezone": "browser",
        "templating": {"list": [datasource, *(_variable(v) for v in dash.variables)]},
        "annotations": {"list": []}, "links": [], "panels": panels,
    }


def render(dash: Dashboard) -> str:
    return json.dumps(build(dash), indent=2, sort_keys=False) + "\n"


def write(directory: Path = DASHBOARDS_DIR) -> list[Path]:
    """Write every dashboard's JSON into ``directory``; the paths written."""
    out = []
    for dash in DASHBOARDS:
        path = directory / dash.file
        path.write_text(render(dash))
        out.append(path)
    return out


def load(directory: Path = DASHBOARDS_DIR) -> list[dict[str, Any]]:
    """The committed dashboard JSON files (what ``push`` uploads and the Prometheus test checks)."""
    return [json.loads((directory / dash.file).read_text()) for dash in DASHBOARDS]


# ------------------------------------------------------------------------------------------ push


class PushError(RuntimeError):
    """Pushing to Grafana failed; the message is one line for the user."""


def push(url: str, *, token: str | None = None, user: str | None = None, password: str | None = None,
         folder: str = "kemu", directory: Path = DASHBOARDS_DIR, timeout: float = 10.0) -> list[str]:
    """Create ``folder`` if missing and upload every dashboard into it, overwriting; the uids pushed.

    ``token`` is an API key or service-account token; else ``user``/``password`` (basic auth);
    else credentials in the URL (``http://admin:admin@host:3000``), as grafana-client reads them.
    """
    from urllib.parse import urlparse

    import niquests
    from grafana_client import GrafanaApi
    from grafana_client.client import GrafanaClientError, GrafanaException

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise PushError(f"--grafana-url must be an http(s) URL, not {url!r}")
    auth: str | tuple[str, str] | None = token or ((user, password or "") if user else None)
    api = GrafanaApi.from_url(url, credential=auth, timeout=timeout)
    try:
        folder_uid = _ensure_folder(api, folder)
        pushed = []
        for dash in load(directory):
            # id None: Grafana matches on uid, so a push creates or overwrites, never duplicates.
            api.dashboard.update_dashboard({"dashboard": {**dash, "id": None}, "folderUid": folder_uid,
                                            "overwrite": True, "message": "kemu dashboards push"})
            pushed.append(str(dash["uid"]))
        return pushed
    except GrafanaClientError as e:
        if e.status_code in (401, 403):
            raise PushError(f"Grafana at {url} refused the credentials ({e.status_code}): pass --token or "
                            "--user/--password of an account that may edit dashboards") from None
        raise PushError(f"Grafana at {url} answered {e.status_code}: {e.message}") from None
    except GrafanaException as e:
        raise PushError(f"Grafana at {url} failed: {e.message}") from None
    except niquests.exceptions.RequestException:
        raise PushError(f"cannot reach Grafana at {url}: is it running, and is the URL right?") from None


def _ensure_folder(api: Any, title: str) -> str:
    for existing in api.folder.get_all_folders():
        if existing.get("title") == title:
            return str(existing["uid"])
    created = api.folder.create_folder(title, uid=_folder_uid(title))
    return str(created["uid"])


def _folder_uid(title: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in title.lower())[:40] or "kemu"


if __name__ == "__main__":
    for written in write():
        print(written)
