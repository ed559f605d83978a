"""Server-side printing: ``meta.k8s.io/v1 Table`` output, printer columns as data per kind.

``kubectl get`` asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``
and prints whatever columns the server returns. Upstream's columns and cell
rules live in ``pkg/printers/internalversion/printers.go`` (``AddHandlers`` for
the column definitions, ``printPod``/``printNode``/... for the cells); this
module re-states them for kemu's kinds as a table, :data:`PRINTERS`, keyed by
``Kind.resource``: a kind's :class:`Printer` is its column list plus one
function from (object, now) to the cells. A kind without an entry gets
:data:`DEFAULT_PRINTER` (NAME, AGE), so a new kind prints without code here.

As upstream's server-side printers do (``pkg/printers/storage``), every row
carries all columns, wide ones (``priority`` 1) included; ``kubectl`` hides
those unless ``-o wide``. Ages are relative to the cluster clock's ``now`` and
formatted like ``apimachinery/pkg/util/duration.HumanDuration``. Rows carry
the object as ``PartialObjectMetadata`` unless the client asks for
``includeObject=Object`` or ``None`` (upstream ``handlers/response.go``
``asTable``). LimitRange has no upstream printer, so it gets upstream's
default table convertor's ``NAME  CREATED AT``.
"""

from __future__ import annotations

from collections.abc import Iterable

from emulator.api.types import Obj
from emulator.apiserver.printing import (
    AGE,
    AGE_DOC,
    NAME,
    NAME_DOC,
    WIDE_WORKLOAD,
    Cell,
    Column,
    Printer,
    age,
    containers_cells,
    format_labels,
    int_or_string,
    name_of,
    selector_string,
    since,
)
from emulator.apiserver.tables_autoscaling import AUTOSCALING_PRINTERS
from emulator.apiserver.tables_workloads import WORKLOAD_PRINTERS


# ----------------------------------------------------------------------------- pods
def _pod_cells(pod: Obj, now: float) -> list[Cell]:
    """``printPod``: READY, STATUS (the kubectl reason rules), RESTARTS, AGE and the wide columns."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    sidecars = {n for n, c in init_specs.items() if c.get("restartPolicy") == "Always"}
    total = len(spec.get("containers") or []) + len(sidecars)
    ready = restarts = sidecar_restarts = 0
    last_restart = sidecar_last_restart = ""
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    conditions = status.get("conditions") or []
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        finished = ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or ""
        last_restart = max(last_restart, finished)
        is_sidecar = cs.get("name") in sidecars
        if is_sidecar:
            sidecar_restarts += int(cs.get("restartCount") or 0)
            sidecar_last_restart = max(sidecar_last_restart, finished)
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode") == 0:
            continue
        if is_sidecar and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            if terminated.get("reason"):
                reason = "Init:" + terminated["reason"]
            elif terminated.get("signal"):
                reason = f"Init:Signal:{terminated['signal']}"
            else:
                reason = f"Init:ExitCode:{terminated.get('exitCode', 0)}"
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions)
    if not initializing or initialized:
        restarts, last_restart = sidecar_restarts, sidecar_last_restart
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            finished = ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or ""
            last_restart = max(last_restart, finished)
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                reason = (f"Signal:{terminated['signal']}" if terminated.get("signal")
                          else f"ExitCode:{terminated.get('exitCode', 0)}")
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            reason = "Running" if pod_ready else "NotReady"

    if meta.get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts and last_restart:
        restarts_cell = f"{restarts} ({since(last_restart, now)} ago)"
    pod_ips = status.get("podIPs") or []
    ip = (pod_ips[0].get("ip") if pod_ips else status.get("podIP")) or "<none>"
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        by_type = {}
        for c in conditions:
            by_type.setdefault(c.get("type"), c.get("status"))
        true = sum(1 for g in gates if by_type.get(g.get("conditionType")) == "True")
        gates_cell = f"{true}/{len(gates)}"
    return [meta.get("name", ""), f"{ready}/{total}", reason, restarts_cell, since(meta.get("creationTimestamp"), now),
            ip, spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>", gates_cell]


POD_PRINTER = Printer((
    NAME,
    Column("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
    Column("Status", description="The aggregate status of the containers in this pod."),
    Column("Restarts", description="The number of times the containers in this pod have been restarted and when "
                                   "the last container in this pod has restarted."),
    AGE,
    Column("IP", priority=1, description="podIP address allocated to the pod."),
    Column("Node", priority=1, description="NodeName is a request to schedule this pod onto a specific node."),
    Column("Nominated Node", priority=1, description="nominatedNodeName is set only when this pod preempts other "
                                                     "pods on the node."),
    Column("Readiness Gates", priority=1, description="If specified, all readiness gates will be evaluated for "
                                                      "pod readiness."),
), _pod_cells)


# ----------------------------------------------------------------------------- nodes
def _node_cells(node: Obj, now: float) -> list[Cell]:
    """``printNode``: Ready/NotReady/Unknown (+ SchedulingDisabled), roles from labels, kubelet version."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    states = ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in (meta.get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/"):]:
            roles.add(key[len("node-role.kubernetes.io/"):])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address", "") for a in addresses if a.get("type") == kind), "<none>")

    return [meta.get("name", ""), ",".join(states), ",".join(sorted(roles)) or "<none>",
            since(meta.get("creationTimestamp"), now), info.get("kubeletVersion", ""),
            address("InternalIP"), address("ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


NODE_PRINTER = Printer((
    NAME,
    Column("Status", description="The status of the node"),
    Column("Roles", description="The roles of the node"),
    AGE,
    Column("Version", description="Kubelet Version reported by the node."),
    Column("Internal-IP", priority=1, description="List of addresses reachable to the node."),
    Column("External-IP", priority=1, description="List of addresses reachable to the node."),
    Column("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release."),
    Column("Kernel-Version", priority=1, description="Kernel Version reported by the node."),
    Column("Container-Runtime", priority=1, description="ContainerRuntime Version reported by the node."),
), _node_cells)


# ----------------------------------------------------------------------------- workloads


def _deployment_cells(d: Obj, now: float) -> list[Cell]:
    spec, status = d.get("spec") or {}, d.get("status") or {}
    template_spec = (spec.get("template") or {}).get("spec") or {}
    return [name_of(d), f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas') or 0)}",
            int(status.get("updatedReplicas") or 0), int(status.get("availableReplicas") or 0), age(d, now),
            *containers_cells(template_spec), selector_string(spec.get("selector"))]


def _replicaset_cells(rs: Obj, now: float) -> list[Cell]:
    spec, status = rs.get("spec") or {}, rs.get("status") or {}
    template_spec = (spec.get("template") or {}).get("spec") or {}
    return [name_of(rs), int(spec.get("replicas") or 0), int(status.get("replicas") or 0),
            int(status.get("readyReplicas") or 0), age(rs, now),
            *containers_cells(template_spec), selector_string(spec.get("selector"))]


def _daemonset_cells(ds: Obj, now: float) -> list[Cell]:
    spec, status = ds.get("spec") or {}, ds.get("status") or {}
    template_spec = (spec.get("template") or {}).get("spec") or {}
    return [name_of(ds), int(status.get("desiredNumberScheduled") or 0), int(status.get("currentNumberScheduled") or 0),
            int(status.get("numberReady") or 0), int(status.get("updatedNumberScheduled") or 0),
            int(status.get("numberAvailable") or 0), format_labels(template_spec.get("nodeSelector")), age(ds, now),
            *containers_cells(template_spec), selector_string(spec.get("selector"))]


DEPLOYMENT_PRINTER = Printer((
    NAME,
    Column("Ready", description="Number of the pod with ready state"),
    Column("Up-to-date", description="Total number of non-terminated pods targeted by this deployment that have "
                                     "the desired template spec."),
    Column("Available", description="Total number of available pods (ready for at least minReadySeconds) targeted "
                                    "by this deployment."),
    AGE, *WIDE_WORKLOAD,
), _deployment_cells)

REPLICASET_PRINTER = Printer((
    NAME,
    Column("Desired", "integer", "Replicas is the number of desired replicas."),
    Column("Current", "integer", "Replicas is the most recently observed number of replicas."),
    Column("Ready", "integer", "The number of ready replicas for this replica set."),
    AGE, *WIDE_WORKLOAD,
), _replicaset_cells)

DAEMONSET_PRINTER = Printer((
    NAME,
    Column("Desired", "integer", "The total number of nodes that should be running the daemon pod."),
    Column("Current", "integer", "The number of nodes that are running at least 1 daemon pod and are supposed to "
                                 "run the daemon pod."),
    Column("Ready", "integer", "The number of nodes that should be running the daemon pod and have one or more of "
                               "the daemon pod running and ready."),
    Column("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
    Column("Available", "integer", "The number of nodes that should be running the daemon pod and have one or more "
                                   "of the daemon pod running and available."),
    Column("Node Selector", description="NodeSelector is a selector which must be true for the pod to fit on a node."),
    AGE, *WIDE_WORKLOAD,
), _daemonset_cells)


# ----------------------------------------------------------------------------- the rest
def _pdb_cells(pdb: Obj, now: float) -> list[Cell]:
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    return [name_of(pdb), int_or_string(spec.get("minAvailable")), int_or_string(spec.get("maxUnavailable")),
            int(status.get("disruptionsAllowed") or 0), age(pdb, now)]


def _priority_class_cells(pc: Obj, now: float) -> list[Cell]:
    return [name_of(pc), int(pc.get("value") or 0), bool(pc.get("globalDefault")), age(pc, now),
            pc.get("preemptionPolicy") or ""]


def _event_cells(ev: Obj, now: float) -> list[Cell]:
    """``printEvent``: ages of first/last seen (eventTime / series for new-style events), ``kind/name`` target."""
    first = since(ev.get("firstTimestamp"), now) if ev.get("firstTimestamp") else since(ev.get("eventTime"), now)
    last = since(ev.get("lastTimestamp"), now) if ev.get("lastTimestamp") else first
    count = int(ev.get("count") or 0)
    series = ev.get("series")
    if isinstance(series, dict):
        last = since(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1
    involved = ev.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = ev.get("source") or {}
    component = source.get("component") or ev.get("reportingComponent") or ""
    host = source.get("host") or ev.get("reportingInstance") or ""
    return [last, ev.get("type", ""), ev.get("reason", ""), target, involved.get("fieldPath", ""),
            f"{component}, {host}" if host else component, str(ev.get("message") or "").strip(), first, count,
            name_of(ev)]


def _resource_quota_cells(rq: Obj, now: float) -> list[Cell]:
    """``printResourceQuota``: ``name: used/hard`` per ``status.hard`` name; ``limits.*`` in LIMIT, others REQUEST."""
    status = rq.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    request: list[str] = []
    limit: list[str] = []
    for name in sorted(hard):
        target = limit if name.split(".")[0] == "limits" and "." in name else request
        target.append(f"{name}: {used.get(name, '0')}/{hard[name]}")
    return [name_of(rq), age(rq, now), ", ".join(request), ", ".join(limit)]


RESOURCE_QUOTA_PRINTER = Printer((
    NAME,
    AGE,
    Column("Request", description="Request represents a minimum amount of cpu/memory that a container may consume."),
    Column("Limit", description="Limits control the maximum amount of cpu/memory that a container may use "
                                "independent of contention on the node."),
), _resource_quota_cells)


PRINTERS: dict[str, Printer] = {
    **WORKLOAD_PRINTERS,
    **AUTOSCALING_PRINTERS,
    "resourcequotas": RESOURCE_QUOTA_PRINTER,
    "pods": POD_PRINTER,
    "nodes": NODE_PRINTER,
    "deployments.apps": DEPLOYMENT_PRINTER,
    "replicasets.apps": REPLICASET_PRINTER,
    "daemonsets.apps": DAEMONSET_PRINTER,
    "poddisruptionbudgets.policy": Printer((
        NAME,
        Column("Min Available", description="The minimum number of pods that must be available."),
        Column("Max Unavailable", description="The maximum number of pods that may be unavailable."),
        Column("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
        AGE,
    ), _pdb_cells),
    "priorityclasses.scheduling.k8s.io": Printer((
        NAME,
        Column("Value", "integer", "value represents the integer value of this priority class."),
        Column("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered "
                                            "as the default priority for pods that do not have any priority class."),
        AGE,
        Column("PreemptionPolicy", description="preemptionPolicy is the Policy for preempting pods with lower "
                                               "priority."),
    ), _priority_class_cells),
    "events": Printer((
        Column("Last Seen", description="The time at which the most recent occurrence of this event was recorded."),
        Column("Type", description="Type of this event (Normal, Warning), new types could be added in the future"),
        Column("Reason", description="This should be a short, machine understandable string that gives the reason "
                                     "for the transition into the object's current status."),
        Column("Object", description="The object that this event is about."),
        Column("Subobject", priority=1, description="If referring to a piece of an object instead of an entire "
                                                    "object, this string should contain a valid JSON/Go field "
                                                    "access statement."),
        Column("Source", priority=1, description="The component reporting this event."),
        Column("Message", description="A human-readable description of the status of this operation."),
        Column("First Seen", priority=1, description="The time at which the event was first recorded."),
        Column("Count", priority=1, description="The number of times this event has occurred."),
        Column("Name", priority=1, format="name", description=NAME_DOC),
    ), _event_cells),
    "namespaces": Printer((NAME, Column("Status", description="The status of the namespace"), AGE),
                          lambda o, now: [name_of(o), (o.get("status") or {}).get("phase", ""), age(o, now)]),
    "leases.coordination.k8s.io": Printer(
        (NAME, Column("Holder", description="holderIdentity contains the identity of the holder of a current lease."),
         AGE),
        lambda o, now: [name_of(o), (o.get("spec") or {}).get("holderIdentity") or "", age(o, now)]),
    "runtimeclasses.node.k8s.io": Printer(
        (NAME, Column("Handler", description="handler specifies the underlying runtime and configuration that the "
                                             "CRI implementation will use to handle pods of this class."), AGE),
        lambda o, now: [name_of(o), o.get("handler", ""), age(o, now)]),
    "configmaps": Printer(
        (NAME, Column("Data", description="Data contains the configuration data."), AGE),
        lambda o, now: [name_of(o), len(o.get("data") or {}) + len(o.get("binaryData") or {}), age(o, now)]),
    # No upstream printer: the generic table convertor (rest.NewDefaultTableConvertor) prints NAME, CREATED AT.
    "limitranges": Printer(
        (NAME, Column("Created At", "date", AGE_DOC)),
        lambda o, now: [name_of(o), (o.get("metadata") or {}).get("creationTimestamp")]),
}

# pkg/printers/internalversion/printers.go: roles print NAME, CREATED AT; bindings their role and, wide, subjects.
_ROLE_PRINTER = Printer((NAME, Column("Created At", "date", AGE_DOC)),
                        lambda o, now: [name_of(o), (o.get("metadata") or {}).get("creationTimestamp")])


def _subjects(binding: Obj) -> tuple[str, str, str]:
    users, groups, sas = [], [], []
    for s in binding.get("subjects") or ():
        kind = s.get("kind") if isinstance(s, dict) else None
        if kind == "User":
            users.append(s.get("name") or "")
        elif kind == "Group":
            groups.append(s.get("name") or "")
        elif kind == "ServiceAccount":
            sas.append(f"{s.get('namespace') or ''}:{s.get('name') or ''}")
    return ", ".join(users), ", ".join(groups), ", ".join(sas)


def _binding_cells(b: Obj, now: float) -> list[Cell]:
    ref = b.get("roleRef") or {}
    return [name_of(b), f"{ref.get('kind', '')}/{ref.get('name', '')}", age(b, now), *_subjects(b)]


_BINDING_PRINTER = Printer((
    NAME,
    Column("Role", description="RoleRef can reference a Role in the current namespace or a ClusterRole in the global "
                               "namespace."),
    AGE,
    Column("Users", priority=1, description="Users in the roleBinding"),
    Column("Groups", priority=1, description="Groups in the roleBinding"),
    Column("ServiceAccounts", priority=1, description="ServiceAccounts in the roleBinding"),
), _binding_cells)
PRINTERS.update({
    "roles.rbac.authorization.k8s.io": _ROLE_PRINTER,
    "clusterroles.rbac.authorization.k8s.io": _ROLE_PRINTER,
    "rolebindings.rbac.authorization.k8s.io": _BINDING_PRINTER,
    "clusterrolebindings.rbac.authorization.k8s.io": _BINDING_PRINTER,
})

DEFAULT_PRINTER = Printer((NAME, AGE), lambda o, now: [name_of(o), age(o, now)])

SCALE_PRINTER = Printer((
    Column("Name", description=NAME_DOC),
    Column("Desired", "integer", "desired number of instances for the scaled object."),
    Column("Available", "integer", "actual number of observed instances of the scaled object."),
    AGE,
), lambda o, now: [name_of(o), int((o.get("spec") or {}).get("replicas") or 0),
                   int((o.get("status") or {}).get("replicas") or 0), age(o, now)])


def printer_for(resource: str) -> Printer:
    return PRINTERS.get(resource, DEFAULT_PRINTER)


def _row_object(obj: Obj, include: str, group_version: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": group_version, "metadata": obj.get("metadata") or {}}


def table(printer: Printer, objs: Iterable[Obj], now: float, *, include_object: str = "Metadata",
          version: str = "v1", resource_version: str = "", continue_token: str | None = None,
          with_columns: bool = True) -> Obj:
    """A ``meta.k8s.io/<version> Table`` of ``objs`` (``with_columns=False`` for watch events after the first)."""
    group_version = f"meta.k8s.io/{version}"
    rows = []
    for obj in objs:
        row: Obj = {"cells": printer.cells(obj, now)}
        phase = (obj.get("status") or {}).get("phase") if isinstance(obj.get("status"), dict) else None
        if phase in ("Succeeded", "Failed") and printer is POD_PRINTER:
            # printers.go podSuccessConditions / podFailedConditions.
            row["conditions"] = [{"type": "Completed", "status": "True", "reason": phase,
                                  "message": "The pod has completed successfully." if phase == "Succeeded"
                                  else "The pod failed."}]
        row_object = _row_object(obj, include_object, group_version)
        if row_object is not None:
            row["object"] = row_object
        rows.append(row)
    meta: Obj = {}
    if resource_version:
        meta["resourceVersion"] = resource_version
    if continue_token:
        meta["continue"] = continue_token
    out: Obj = {"kind": "Table", "apiVersion": group_version, "metadata": meta}
    if with_columns:
        out["columnDefinitions"] = printer.definitions()
    out["rows"] = rows
    return out


