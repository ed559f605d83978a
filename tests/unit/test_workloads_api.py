"""Unit tests of the issue-18 API pieces: cron schedules, printers, Secret/Service defaulting and validation.

Expected values are worked out here from what a schedule or a column means (upstream's
``robfig/cron`` semantics, ``printers.go`` rules), not read back from kemu.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from emulator.api import cron, errors
from emulator.api.kinds import CRONJOB, ENDPOINTSLICE, SECRET, SERVICE, SERVICEACCOUNT, by_resource
from emulator.api.types import Obj
from emulator.apiserver import patch
from emulator.apiserver.tables import printer_for
from emulator.server.defaults import apply_defaults
from emulator.server.validation import validate


def ts(text: str) -> float:
    """Epoch seconds of an ISO time; UTC unless it carries an offset."""
    when = datetime.fromisoformat(text)
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


# ----------------------------------------------------------------------------- cron
@pytest.mark.parametrize(("spec", "after", "tz", "expected"), [
    ("*/15 * * * *", "2024-03-01T10:07:00", None, "2024-03-01T10:15:00"),
    ("0 * * * *", "2024-03-01T10:00:00", None, "2024-03-01T11:00:00"),  # strictly after
    ("@daily", "2024-03-01T23:59:59", None, "2024-03-02T00:00:00"),
    ("0 9 * * 1-5", "2024-03-01T10:00:00", None, "2024-03-04T09:00:00"),  # Friday → Monday
    ("0 9 * * MON", "2024-03-01T10:00:00", None, "2024-03-04T09:00:00"),
    ("0 0 29 2 *", "2024-03-01T00:00:00", None, "2028-02-29T00:00:00"),  # the next leap day
    ("0 0 13 * 5", "2024-03-01T00:00:00", None, "2024-03-08T00:00:00"),  # dom OR dow when both restricted
    ("30 2 * * *", "2024-03-01T00:00:00", "Europe/Berlin", "2024-03-01T02:30:00+01:00"),
    ("30 17 * * *", "2024-07-01T00:00:00", "America/New_York", "2024-07-01T17:30:00-04:00"),
    ("0 0 1 jan,jul *", "2024-03-01T00:00:00", None, "2024-07-01T00:00:00"),
    ("0 0 * * SUN", "2024-03-01T00:00:00", None, "2024-03-03T00:00:00"),
], ids=["step", "strictly-after", "descriptor", "weekday-range", "weekday-name", "leap-day", "dom-or-dow",
        "berlin", "new-york-summer", "month-names", "sunday"])
def test_next_activation(spec: str, after: str, tz: str | None, expected: str) -> None:
    assert cron.parse(spec).next_after(ts(after), tz) == ts(expected)


@pytest.mark.parametrize(("spec", "message"), [
    ("60 * * * *", r"end of range \(60\) above maximum \(59\)"),
    ("* * * *", "expected exactly 5 fields"),
    ("CRON_TZ=UTC * * * * *", "use timeZone field instead"),
    ("@fortnightly", "unrecognized descriptor"),
    ("*/0 * * * *", "step of range should be a positive number"),
    ("0 0 * * 7", r"end of range \(7\) above maximum \(6\)"),  # robfig/cron's weekdays are 0-6
], ids=["range", "fields", "tz-prefix", "descriptor", "zero-step", "weekday-7"])
def test_bad_schedules(spec: str, message: str) -> None:
    with pytest.raises(cron.CronError, match=message):
        cron.parse(spec)


# ----------------------------------------------------------------------------- printers
NOW = ts("2024-03-01T12:00:00")


def job(conditions: list[str], *, completions: int | None = 1, parallelism: int = 1, succeeded: int = 0,
        start: str | None = "2024-03-01T11:58:00", end: str | None = None, deleting: bool = False) -> Obj:
    status: Obj = {"succeeded": succeeded,
                   "conditions": [{"type": c, "status": "True"} for c in conditions]}
    if start:
        status["startTime"] = start + "Z"
    if end:
        status["completionTime"] = end + "Z"
    meta: Obj = {"name": "j", "creationTimestamp": "2024-03-01T11:58:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2024-03-01T12:00:00Z"
    spec: Obj = {"parallelism": parallelism, "template": {"spec": {"containers": []}}}
    if completions is not None:
        spec["completions"] = completions
    return {"metadata": meta, "spec": spec, "status": status}


@pytest.mark.parametrize(("obj", "cells"), [
    (job([]), ["j", "Running", "0/1", "2m", "2m"]),
    (job(["SuccessCriteriaMet", "Complete"], succeeded=1, end="2024-03-01T11:58:45"),
     ["j", "Complete", "1/1", "45s", "2m"]),
    (job(["FailureTarget", "Failed"]), ["j", "Failed", "0/1", "2m", "2m"]),
    (job(["Suspended"], start=None), ["j", "Suspended", "0/1", "", "2m"]),
    (job([], deleting=True), ["j", "Terminating", "0/1", "2m", "2m"]),
    (job([], completions=None, parallelism=3), ["j", "Running", "0/1 of 3", "2m", "2m"]),
], ids=["running", "complete", "failed", "suspended", "terminating", "parallel-no-completions"])
def test_job_columns(obj: Obj, cells: list[str]) -> None:
    printer = printer_for("jobs.batch")
    assert [c.name for c in printer.columns][:5] == ["Name", "Status", "Completions", "Duration", "Age"]
    assert printer.cells(obj, NOW)[:5] == cells


def test_service_and_slice_columns() -> None:
    svc = {"metadata": {"name": "web", "creationTimestamp": "2024-03-01T11:00:00Z"},
           "spec": {"type": "NodePort", "clusterIP": "10.96.3.4", "selector": {"app": "web"},
                    "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}}
    assert printer_for("services").cells(svc, NOW) == ["web", "NodePort", "10.96.3.4", "<none>",
                                                      "80:30080/TCP,53/UDP", "60m", "app=web"]
    lb = {**svc, "spec": {**svc["spec"], "type": "LoadBalancer"}, "status": {"loadBalancer": {}}}
    assert printer_for("services").cells(lb, NOW)[3] == "<pending>"
    endpoints = [{"addresses": [f"10.0.0.{i}"]} for i in range(5)]
    es = {"metadata": {"name": "web-abcde", "creationTimestamp": "2024-03-01T11:00:00Z"}, "addressType": "IPv4",
          "endpoints": endpoints, "ports": [{"port": 8080}]}
    assert printer_for(ENDPOINTSLICE.resource).cells(es, NOW) == [
        "web-abcde", "IPv4", "8080", "10.0.0.0,10.0.0.1,10.0.0.2 + 2 more...", "60m"]
    ep = {"metadata": {"name": "web", "creationTimestamp": "2024-03-01T11:00:00Z"},
          "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]}]}
    assert printer_for("endpoints").cells(ep, NOW)[1] == "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."


def test_controller_revision_columns() -> None:
    rev = {"metadata": {"name": "db-abc", "creationTimestamp": "2024-03-01T11:00:00Z", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "u", "controller": True}]},
        "revision": 3}
    assert printer_for("controllerrevisions.apps").cells(rev, NOW) == ["db-abc", "statefulset.apps/db", 3, "60m"]


def test_cron_job_columns() -> None:
    cj = {"metadata": {"name": "nightly", "creationTimestamp": "2024-03-01T11:00:00Z"},
          "spec": {"schedule": "0 3 * * *", "timeZone": "Europe/Berlin", "suspend": False,
                   "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}},
          "status": {"active": [{"name": "a"}], "lastScheduleTime": "2024-03-01T11:55:00Z"}}
    assert printer_for(CRONJOB.resource).cells(cj, NOW)[:7] == [
        "nightly", "0 3 * * *", "Europe/Berlin", "False", 1, "5m", "60m"]


# ----------------------------------------------------------------------------- secrets and services
def test_string_data_is_merged_into_data_and_wins() -> None:
    secret = {"metadata": {"name": "s"}, "data": {"a": base64.b64encode(b"old").decode()},
              "stringData": {"a": "new", "b": "two"}}
    apply_defaults(SECRET, secret)
    assert "stringData" not in secret and secret["type"] == "Opaque"
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {"a": "new", "b": "two"}


@pytest.mark.parametrize(("body", "field"), [
    ({"data": {"k": "not base64!"}}, "data[k]"),
    ({"data": {"bad key": "eA=="}}, "data"),
    ({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}}, "data[tls.key]"),
    ({"type": "kubernetes.io/service-account-token"}, "metadata.annotations[kubernetes.io/service-account.name]"),
], ids=["base64", "key", "tls-needs-key", "sa-token-needs-annotation"])
def test_bad_secrets(body: Obj, field: str) -> None:
    with pytest.raises(errors.StatusError) as e:
        validate(SECRET, {"metadata": {"name": "s", "namespace": "default"}, **body})
    assert e.value.code == 422 and field in {c.field for c in e.value.causes}


@pytest.mark.parametrize(("body", "field"), [
    ({"endpoints": []}, "addressType"),
    ({"addressType": "IPv4", "endpoints": [{"addresses": ["fd00::1"]}]}, "endpoints[0].addresses[0]"),
    ({"addressType": "IPv4", "endpoints": [{"addresses": []}]}, "endpoints[0].addresses"),
    ({"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}] * 1001}, "endpoints"),
    ({"addressType": "IPv4", "ports": [{"port": 0}]}, "ports[0].port"),
], ids=["address-type-required", "ipv6-in-ipv4-slice", "no-addresses", "over-1000-endpoints", "port-range"])
def test_bad_endpoint_slices(body: Obj, field: str) -> None:
    with pytest.raises(errors.StatusError) as e:
        validate(ENDPOINTSLICE, {"metadata": {"name": "s", "namespace": "default"}, **body})
    assert e.value.code == 422 and field in {c.field for c in e.value.causes}


def test_service_defaults_as_upstream() -> None:
    svc = {"metadata": {"name": "web"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}
    apply_defaults(SERVICE, svc)
    spec = svc["spec"]
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert (spec["sessionAffinity"], spec["externalTrafficPolicy"], spec["internalTrafficPolicy"]) == (
        "None", "Cluster", "Cluster")


def test_every_new_kind_is_served() -> None:
    for resource in ("secrets", "serviceaccounts", "services", "endpoints", "endpointslices.discovery.k8s.io",
                     "statefulsets.apps", "controllerrevisions.apps", "cronjobs.batch"):
        assert by_resource(resource).namespaced


def test_service_account_secrets_merge_by_name() -> None:
    """core/v1 ServiceAccount.secrets is patchStrategy merge, patchMergeKey name: a patch adds, not replaces."""
    current = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"}, "secrets": [{"name": "s1"}]}
    out = patch.apply_patch(SERVICEACCOUNT, current, b'{"secrets": [{"name": "s2"}]}', patch.STRATEGIC_MERGE_PATCH)
    assert sorted(s["name"] for s in out["secrets"]) == ["s1", "s2"]
