"""Printer columns of Services, endpoints, Secrets, ServiceAccounts, StatefulSets, Jobs and CronJobs.

The same data as :mod:`emulator.apiserver.tables` (which merges :data:`WORKLOAD_PRINTERS`
into its table), restating ``printService``, ``printEndpoints``, ``printEndpointSlice``,
``printSecret``, ``printServiceAccount``, ``printStatefulSet``, ``printControllerRevision``,
``printJob`` and ``printCronJob`` from upstream ``pkg/printers/internalversion/printers.go``.
"""

from __future__ import annotations

from typing import Any

from emulator.api.types import Obj
from emulator.apiserver.printing import (
    AGE,
    NAME,
    WIDE_WORKLOAD,
    Cell,
    Column,
    Printer,
    age,
    containers_cells,
    format_labels,
    human_duration,
    name_of,
    selector_string,
    since,
    timestamp,
)

_MAX_LISTED = 3  # formatEndpoints / formatDiscoveryEndpoints list three, then "+ N more..."


def _listed(items: list[str], count: int, empty: str) -> str:
    if not items:
        return empty
    text = ",".join(items[:_MAX_LISTED])
    return f"{text} + {count - _MAX_LISTED} more..." if count > _MAX_LISTED else text


# ----------------------------------------------------------------------------- services
def _external_ip(svc: Obj) -> str:
    """``getServiceExternalIP``: externalIPs, the load balancer's ingress, or the ExternalName."""
    spec, status = svc.get("spec") or {}, svc.get("status") or {}
    stype = spec.get("type", "ClusterIP")
    external = list(spec.get("externalIPs") or [])
    if stype in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if stype == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname") or "" for i in (status.get("loadBalancer") or {}).get("ingress")
                   or []]
        found = [x for x in ingress + external if x]
        return ",".join(found) if found else "<pending>"
    if stype == "ExternalName":
        return str(spec.get("externalName") or "")
    return "<unknown>"


def _port_string(ports: list[Obj]) -> str:
    """``makePortString``: ``80/TCP`` or ``80:30080/TCP`` per port."""
    out = []
    for p in ports:
        protocol = p.get("protocol", "TCP")
        out.append(f"{p.get('port')}:{p['nodePort']}/{protocol}" if p.get("nodePort")
                   else f"{p.get('port')}/{protocol}")
    return ",".join(out) if out else "<none>"


def _service_cells(svc: Obj, now: float) -> list[Cell]:
    spec = svc.get("spec") or {}
    return [name_of(svc), spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>", _external_ip(svc),
            _port_string(spec.get("ports") or []), age(svc, now), format_labels(spec.get("selector"))]


def _endpoints_cells(ep: Obj, now: float) -> list[Cell]:
    """``formatEndpoints``: ``ip:port`` for every address and port."""
    listed: list[str] = []
    count = 0
    for subset in ep.get("subsets") or []:
        addresses = [a.get("ip", "") for a in subset.get("addresses") or []]
        ports = subset.get("ports") or []
        if not ports:
            listed += addresses
            count += len(addresses)
            continue
        for port in ports:
            for ip in addresses:
                listed.append(f"[{ip}]:{port.get('port')}" if ":" in ip else f"{ip}:{port.get('port')}")
                count += 1
    return [name_of(ep), _listed(listed, count, "<none>"), age(ep, now)]


def _slice_cells(es: Obj, now: float) -> list[Cell]:
    """``formatDiscoveryPorts`` / ``formatDiscoveryEndpoints``."""
    ports = [str(p["port"]) if p.get("port") is not None else "<unset>" for p in es.get("ports") or []]
    addresses = [a for e in es.get("endpoints") or [] for a in e.get("addresses") or []]
    return [name_of(es), es.get("addressType", ""), _listed(ports, len(ports), "<unset>"),
            _listed(addresses, len(addresses), "<unset>"), age(es, now)]


# ----------------------------------------------------------------------------- workloads
def _stateful_set_cells(sts: Obj, now: float) -> list[Cell]:
    spec, status = sts.get("spec") or {}, sts.get("status") or {}
    template_spec = (spec.get("template") or {}).get("spec") or {}
    return [name_of(sts), f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas') or 0)}", age(sts, now),
            *containers_cells(template_spec)]


def _has_condition(obj: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def job_status(job: Obj) -> str:
    """``printJob``'s STATUS: the first of Complete, Failed, Terminating, Suspended, the interim ones, Running."""
    if _has_condition(job, "Complete"):
        return "Complete"
    if _has_condition(job, "Failed"):
        return "Failed"
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for ctype in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if _has_condition(job, ctype):
            return ctype
    return "Running"


def _job_cells(job: Obj, now: float) -> list[Cell]:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{int(spec['completions'])}"
    elif int(spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {int(spec['parallelism'])}"
    else:
        completions = f"{succeeded}/1"
    start, end = timestamp(status.get("startTime") or ""), timestamp(status.get("completionTime") or "")
    duration = "" if start is None else human_duration((end if end is not None else now) - start)
    template_spec = (spec.get("template") or {}).get("spec") or {}
    return [name_of(job), job_status(job), completions, duration, age(job, now), *containers_cells(template_spec),
            selector_string(spec.get("selector"))]


def _revision_cells(rev: Obj, now: float) -> list[Cell]:
    """``printControllerRevision``: the controller as ``kind.group/name``, ``<none>`` without one."""
    ref = next((r for r in (rev.get("metadata") or {}).get("ownerReferences") or [] if r.get("controller")), None)
    controller = "<none>"
    if ref is not None:
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        kind = str(ref.get("kind") or "").lower()
        controller = f"{kind}.{group}/{ref.get('name')}" if group else f"{kind}/{ref.get('name')}"
    return [name_of(rev), controller, int(rev.get("revision") or 0), age(rev, now)]


def _bool_ptr(value: Any) -> str:
    return "<unset>" if value is None else ("True" if value else "False")


def _cron_job_cells(cj: Obj, now: float) -> list[Cell]:
    spec, status = cj.get("spec") or {}, cj.get("status") or {}
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    last = status.get("lastScheduleTime")
    return [name_of(cj), spec.get("schedule", ""), spec.get("timeZone") or "<none>", _bool_ptr(spec.get("suspend")),
            len(status.get("active") or []), since(last, now) if last else "<none>", age(cj, now),
            *containers_cells((job_spec.get("template") or {}).get("spec") or {}),
            selector_string(job_spec.get("selector"))]


WORKLOAD_PRINTERS: dict[str, Printer] = {
    "services": Printer((
        NAME,
        Column("Type", description="type determines how the Service is exposed."),
        Column("Cluster-IP", description="clusterIP is the IP address of the service."),
        Column("External-IP", description="externalIPs is a list of IP addresses for which nodes in the cluster "
                                          "will also accept traffic for this service."),
        Column("Port(s)", description="The list of ports that are exposed by this service."),
        AGE,
        Column("Selector", priority=1, description="Route service traffic to pods with label keys and values "
                                                   "matching this selector."),
    ), _service_cells),
    "endpoints": Printer((
        NAME, Column("Endpoints", description="The set of all endpoints is the union of all subsets."), AGE,
    ), _endpoints_cells),
    "endpointslices.discovery.k8s.io": Printer((
        NAME,
        Column("AddressType", description="addressType specifies the type of address carried by this EndpointSlice."),
        Column("Ports", description="ports specifies the list of network ports exposed by each endpoint."),
        Column("Endpoints", description="endpoints is a list of unique endpoints in this slice."),
        AGE,
    ), _slice_cells),
    "secrets": Printer((
        NAME, Column("Type", description="Used to facilitate programmatic handling of secret data."),
        Column("Data", "integer", "The number of data items in the secret."), AGE,
    ), lambda o, now: [name_of(o), o.get("type", ""), len(o.get("data") or {}), age(o, now)]),
    "serviceaccounts": Printer((
        NAME, Column("Secrets", "integer", "The number of secrets listed by the service account."), AGE,
    ), lambda o, now: [name_of(o), len(o.get("secrets") or []), age(o, now)]),
    "statefulsets.apps": Printer((
        NAME, Column("Ready", description="Number of the pod with ready state"), AGE, *WIDE_WORKLOAD[:2],
    ), _stateful_set_cells),
    "controllerrevisions.apps": Printer((
        NAME, Column("Controller", description="Controller of the object."),
        Column("Revision", "integer", "Revision indicates the revision of the state represented by Data."), AGE,
    ), _revision_cells),
    "jobs.batch": Printer((
        NAME,
        Column("Status", description="Status of the job."),
        Column("Completions", description="The completion status of the job."),
        Column("Duration", description="Time required to complete the job."),
        AGE, *WIDE_WORKLOAD,
    ), _job_cells),
    "cronjobs.batch": Printer((
        NAME,
        Column("Schedule", description="The schedule in Cron format."),
        Column("Timezone", description="The time zone name for the given schedule."),
        Column("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions."),
        Column("Active", "integer", "A list of pointers to currently running jobs."),
        Column("Last Schedule", description="Information when was the last time the job was successfully "
                                            "scheduled."),
        AGE, *WIDE_WORKLOAD,
    ), _cron_job_cells),
}
