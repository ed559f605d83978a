"""The pod status a kubelet reports: ``generateAPIPodStatus`` for one pod record.

Upstream counterpart: ``pkg/kubelet/kubelet_pods.go`` (``generateAPIPodStatus``,
``convertToAPIContainerStatuses``) and ``pkg/kubelet/status/generate.go`` (the Initialized,
Ready, ContainersReady conditions). The shape is upstream's: conditions
PodReadyToStartContainers, Initialized, Ready, ContainersReady, PodScheduled; container
statuses with state / lastState / ready / restartCount / imageID / containerID; hostIP(s),
podIP(s), startTime. The status manager (:mod:`~emulator.kubelet.status_manager`) writes what
these functions render.
"""

from __future__ import annotations

from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.kubelet import nodes as nd
from emulator.kubelet.model import KubeletModel
from emulator.kubelet.state import APP_PULL, TERMINAL, NodeRecord, PodRecord, container_id

POD_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")


def render(rec: PodRecord, node: NodeRecord | None, model: KubeletModel, now: float) -> Obj:
    """The pod's status as the kubelet reports it now (``generateAPIPodStatus``)."""
    base = rec.obj.get("status") or {}
    status: Obj = {"phase": "Pending", "qosClass": base.get("qosClass")}
    by_name: dict[str, Obj] = {}
    if rec.in_model:
        ms = model.pod_status(rec.uid)
        status["phase"] = ms["phase"]
        status["qosClass"] = status["qosClass"] or ms.get("qosClass")
        if ms.get("reason"):
            status["reason"] = ms["reason"]
            status["message"] = ms["message"]
        for cs in ms["containerStatuses"]:
            by_name[cs["name"]] = _decorate(rec, cs)
    else:
        for c in rec.apps:
            name = str(c.get("name"))
            reason = "ContainerCreating" if rec.stage == APP_PULL or not rec.init else "PodInitializing"
            waiting: Obj = {"reason": reason}
            if rec.blocked and rec.blocked["name"] == name and not rec.blocked["init"]:
                waiting = rec.blocked["waiting"]
            by_name[name] = {"name": name, "image": str(c.get("image") or ""), "imageID": "",
                             "restartCount": 0, "ready": False, "started": False,
                             "state": {"waiting": waiting}, "lastState": {}}
    spec = rec.obj.get("spec") or {}
    init_statuses: list[Obj] = []
    regular = 0
    for c in spec.get("initContainers") or ():
        name = str(c.get("name"))
        if name in rec.sidecars:
            init_statuses.append(by_name.pop(name))
            continue
        state = rec.init_states[regular] if regular < len(rec.init_states) else {"waiting": {}}
        regular += 1
        if rec.blocked and rec.blocked["name"] == name and rec.blocked["init"]:
            state = {"waiting": rec.blocked["waiting"]}
        done = "terminated" in state
        init_statuses.append({"name": name, "image": str(c.get("image") or ""),
                              "imageID": nd.image_digest(str(c.get("image") or "")) if done or "running" in state
                              else "", "restartCount": 0, "ready": done, "started": "running" in state,
                              "state": state, "lastState": {},
                              **({"containerID": container_id(rec.uid, name, 0)}
                                 if done or "running" in state else {})})
    containers = [by_name[str(c.get("name"))] for c in spec.get("containers") or ()
                  if str(c.get("name")) in by_name]
    initialized = all("terminated" in s for s in rec.init_states)
    unready = [cs["name"] for cs in [*containers, *(s for s in init_statuses if s["name"] in rec.sidecars)]
               if not cs.get("ready")]
    ready = rec.in_model and not unready and status["phase"] == "Running"
    if node is not None:
        status["hostIP"] = node.ip
        status["hostIPs"] = [{"ip": node.ip}]
    if rec.ip:
        status["podIP"] = rec.ip
        status["podIPs"] = [{"ip": rec.ip}]
    if rec.start_time:
        status["startTime"] = rec.start_time
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    status["containerStatuses"] = containers
    status["conditions"] = _conditions(rec, now, ready=ready, initialized=initialized, sandbox=True,
                                            phase=status["phase"], unready=unready)
    if status["qosClass"] is None:
        status.pop("qosClass")
    return status


def _decorate(rec: PodRecord, cs: Obj) -> Obj:
    """Model container status + the runtime's identifiers (imageID, containerID) and restored lastState."""
    name = cs["name"]
    image = cs.get("image") or ""
    state = cs.get("state") or {}
    out = dict(cs)
    if not out.get("lastState") and name in rec.restored_last:
        out["lastState"] = rec.restored_last[name]
    if "running" in state or "terminated" in state or out.get("lastState"):
        out["imageID"] = nd.image_digest(image)
        restarts = int(cs.get("restartCount") or 0)
        out["containerID"] = container_id(rec.uid, name, restarts)
    elif name in rec.created and (state.get("waiting") or {}).get("reason") == "ContainerCreating":
        out["imageID"] = nd.image_digest(image)
    return out


def _conditions(rec: PodRecord, now: float, *, ready: bool, initialized: bool, sandbox: bool, phase: str,
                unready: list[str]) -> list[Obj]:
    stamp = rfc3339(now)
    pending_init = [str(c.get("name")) for c, s in zip(rec.init, rec.init_states, strict=True)
                    if "terminated" not in s]
    wanted: dict[str, tuple[str, str | None, str | None]] = {
        "PodReadyToStartContainers": ("True" if sandbox else "False", None, None),
        "Initialized": ("True", None, None) if initialized else (
            "False", "ContainersNotInitialized", f"containers with incomplete status: [{' '.join(pending_init)}]"),
        "PodScheduled": ("True", None, None),
    }
    if ready:
        wanted["Ready"] = wanted["ContainersReady"] = ("True", None, None)
    elif phase == "Succeeded":
        wanted["Ready"] = wanted["ContainersReady"] = ("False", "PodCompleted", None)
    else:
        text = f"containers with unready status: [{' '.join(unready)}]"
        wanted["ContainersReady"] = ("False", "ContainersNotReady", text)
        wanted["Ready"] = ("False", "ContainersNotReady", text)
    base = {c.get("type"): c for c in (rec.obj.get("status") or {}).get("conditions") or ()}
    out = []
    for ctype in POD_CONDITIONS:
        status, reason, message = wanted[ctype]
        previous = rec.conditions.get(ctype)
        if previous is None and ctype in base and base[ctype].get("status") == status:
            previous = (status, base[ctype].get("lastTransitionTime") or stamp)
        if previous is None or previous[0] != status:
            previous = (status, stamp)
            rec.conditions[ctype] = previous
        cond: Obj = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": previous[1]}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        out.append(cond)
    return out


def terminated_status(rec: PodRecord, node: NodeRecord | None, model: KubeletModel, t: float) -> Obj:
    """The pod's last status: every container stopped at ``t`` (``kill_exit`` for the running ones)."""
    status = render(rec, node, model, t)
    stamp = rfc3339(t)
    codes: list[int] = []

    def stop(cs: Obj) -> Obj:
        state = cs.get("state") or {}
        if "running" in state:
            code = rec.kill_exit
            term = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                    "startedAt": state["running"].get("startedAt"), "finishedAt": stamp}
        elif "terminated" in state:
            term = state["terminated"]
            code = int(term.get("exitCode") or 0)
        else:
            code = 137
            term = {"exitCode": 137, "reason": "ContainerStatusUnknown",
                    "message": "The container could not be located when the pod was terminated",
                    "startedAt": None, "finishedAt": stamp}
        codes.append(code)
        return {**cs, "state": {"terminated": term}, "ready": False, "started": False}

    status["containerStatuses"] = [stop(cs) for cs in status.get("containerStatuses") or ()]
    if status.get("initContainerStatuses"):
        status["initContainerStatuses"] = [
            cs if "terminated" in (cs.get("state") or {}) else stop(cs) for cs in status["initContainerStatuses"]]
    if status.get("phase") not in TERMINAL:
        status["phase"] = "Succeeded" if codes and all(c == 0 for c in codes) else "Failed"
    status["conditions"] = _conditions(rec, t, ready=False, initialized=True, sandbox=False,
                                            phase=status["phase"], unready=[])
    return status
