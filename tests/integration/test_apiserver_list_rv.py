"""LIST with ``resourceVersion`` / ``resourceVersionMatch`` as upstream serves it (emulator.apiserver.listrv).

Through the official ``kubernetes`` client (typed lists take both parameters) and raw HTTP for the
errors' Status bodies. What each case expects is upstream's table from the API concepts page
("Resource versions"), ``ValidateListOptions`` and the etcd3 store / cacher errors; the
resourceVersions come from the store (the objects' own and its counter), never from a list response.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from emulator.api.kinds import CONFIGMAP, SECRET
from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis
from emulator.store.store import Store

pytestmark = pytest.mark.integration

TOKEN = "list-rv-token"
CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis) -> Iterator[ApiServerProcess]:
    proc = ApiServerProcess(ServerSettings(redis_url=redis_server.url, port=0, token=TOKEN,
                                           authorization_mode="AlwaysAllow"))
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def core(redis_url: str, server: ApiServerProcess) -> ServerCore:
    c = ServerCore(Store.connect(redis_url))
    c.bootstrap()
    return c


@pytest.fixture
def v1(server: ApiServerProcess, core: ServerCore, tmp_path: Path) -> Iterator[client.CoreV1Api]:
    api_client = config.new_client_from_config(config_file=str(kubeconfig.write(tmp_path / "kc", server.url, TOKEN)))
    yield client.CoreV1Api(api_client)
    api_client.close()


@pytest.fixture
def http(server: ApiServerProcess, core: ServerCore) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as c:
        yield c


def cm(core: ServerCore, name: str, value: str = "1") -> dict[str, Any]:
    return core.create(CONFIGMAP, {"metadata": {"name": name, "namespace": "default"}, "data": {"v": value}})


def rv_of(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def names(listed: Any) -> list[str]:
    return sorted(i.metadata.name for i in listed.items)


def status(r: httpx.Response, code: int) -> dict[str, Any]:
    assert r.status_code == code, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == code
    return body


# ------------------------------------------------------------------------------------------- served
def test_unset_and_zero_serve_the_latest_state(v1: client.CoreV1Api, core: ServerCore) -> None:
    cm(core, "a")
    newest = cm(core, "b")
    current = core.store.current_rv()
    latest = v1.list_namespaced_config_map("default")  # unset: the most recent state (quorum read)
    assert names(latest) == ["a", "b"] and int(latest.metadata.resource_version) == current
    # "0": any state; kemu has no lagging cache, so "any" is the latest too, never older than what was written.
    anything = v1.list_namespaced_config_map("default", resource_version="0")
    assert names(anything) == ["a", "b"] and int(anything.metadata.resource_version) >= rv_of(newest)
    not_older = v1.list_namespaced_config_map("default", resource_version="0", resource_version_match="NotOlderThan")
    assert names(not_older) == ["a", "b"]


def test_not_older_than_serves_a_state_at_least_as_new(v1: client.CoreV1Api, core: ServerCore) -> None:
    first = cm(core, "a")
    cm(core, "b")
    for match in (None, "NotOlderThan"):  # NotOlderThan is the default when only resourceVersion is set
        kw = {"resource_version_match": match} if match else {}
        listed = v1.list_namespaced_config_map("default", resource_version=str(rv_of(first)), **kw)
        assert names(listed) == ["a", "b"]  # newer than the asked version: b is there
        assert int(listed.metadata.resource_version) >= rv_of(first)


def test_not_older_than_a_version_the_store_has_not_reached_is_504(http: httpx.Client, core: ServerCore) -> None:
    cm(core, "a")
    current = core.store.current_rv()
    future = current + 1000
    r = http.get(CMS, params={"resourceVersion": str(future), "resourceVersionMatch": "NotOlderThan"})
    body = status(r, 504)
    # storage.NewTooLargeResourceVersionError: a Timeout with the ResourceVersionTooLarge cause and a retry hint.
    assert body["reason"] == "Timeout"
    assert body["message"] == f"Timeout: Too large resource version: {future}, current: {current}"
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert body["details"]["retryAfterSeconds"] == 1


def test_exact_serves_the_state_at_that_version_while_the_kind_is_unchanged(
        v1: client.CoreV1Api, core: ServerCore) -> None:
    cm(core, "a")
    second = cm(core, "b")
    # A later write to another kind moves the store's counter but not the configmaps' state.
    core.create(SECRET, {"metadata": {"name": "s", "namespace": "default"}})
    assert core.store.current_rv() > rv_of(second)
    exact = v1.list_namespaced_config_map("default", resource_version=str(rv_of(second)),
                                          resource_version_match="Exact")
    assert names(exact) == ["a", "b"] and int(exact.metadata.resource_version) == rv_of(second)


def test_exact_of_a_version_the_kind_has_moved_past_is_410(v1: client.CoreV1Api, http: httpx.Client,
                                                           core: ServerCore) -> None:
    first = cm(core, "a")
    cm(core, "b")  # the configmaps changed after `first`: kemu keeps no older state to serve
    with pytest.raises(ApiException) as exc:
        v1.list_namespaced_config_map("default", resource_version=str(rv_of(first)), resource_version_match="Exact")
    assert exc.value.status == 410
    body = status(http.get(CMS, params={"resourceVersion": str(rv_of(first)), "resourceVersionMatch": "Exact"}), 410)
    assert body["reason"] == "Expired" and body["message"] == "The resourceVersion for the provided list is too old."


def test_a_paged_list_at_a_version_is_exact_as_upstream_legacy_match(
        v1: client.CoreV1Api, http: httpx.Client, core: ServerCore) -> None:
    first = cm(core, "a")
    second = cm(core, "b")
    cm(core, "c")
    third_rv = core.store.current_rv()
    # limit + resourceVersion (match unset) is "exactly" (cacher delegator: the legacy exact match).
    page = v1.list_namespaced_config_map("default", resource_version=str(third_rv), limit=2)
    assert names(page) == ["a", "b"] and int(page.metadata.resource_version) == third_rv
    rest = v1.list_namespaced_config_map("default", limit=2, _continue=page.metadata._continue)
    assert names(rest) == ["c"] and int(rest.metadata.resource_version) == third_rv
    assert status(http.get(CMS, params={"resourceVersion": str(rv_of(second)), "limit": "2"}), 410)
    # "0" with a limit stays "any".
    assert names(v1.list_namespaced_config_map("default", resource_version="0", limit=5)) == ["a", "b", "c"]
    assert rv_of(first) < rv_of(second)


# ------------------------------------------------------------------------------------------- refused
@pytest.mark.parametrize(("params", "code", "message"), [
    ({"resourceVersionMatch": "NotOlderThan"}, 422,
     'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden '
     "unless resourceVersion is provided"),
    ({"resourceVersion": "0", "resourceVersionMatch": "Exact"}, 422,
     'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is '
     'forbidden for resourceVersion "0"'),
    ({"resourceVersion": "5", "resourceVersionMatch": "Newest"}, 422,
     'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: "Newest": supported values: '
     '"Exact", "NotOlderThan", ""'),
    ({"resourceVersion": "abc"}, 400,
     'invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": '
     "invalid syntax"),
    ({"resourceVersion": "-1"}, 400,
     'invalid resource version: resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": '
     "invalid syntax"),
    ({"resourceVersion": "18446744073709551616"}, 400,
     'invalid resource version: resourceVersion: Invalid value: "18446744073709551616": strconv.ParseUint: '
     'parsing "18446744073709551616": value out of range'),
    ({"sendInitialEvents": "true"}, 422,
     'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list'),
], ids=["match-without-rv", "exact-zero", "unknown-match", "not-a-number", "negative", "past-uint64",
        "send-initial-events"])
def test_refused_list_options(http: httpx.Client, params: dict[str, str], code: int, message: str) -> None:
    body = status(http.get(CMS, params=params), code)
    assert body["message"] == message
    if code == 422:
        assert body["reason"] == "Invalid" and body["details"]["kind"] == "ListOptions"
        assert body["details"]["group"] == "meta.k8s.io"


def test_match_or_version_beside_a_continue_token(http: httpx.Client, core: ServerCore) -> None:
    for name in ("a", "b", "c"):
        cm(core, name)
    token = http.get(CMS, params={"limit": "1"}).json()["metadata"]["continue"]
    body = status(http.get(CMS, params={"continue": token, "resourceVersion": "1", "resourceVersionMatch": "Exact"}),
                  422)
    assert "resourceVersionMatch is forbidden when continue is provided" in body["message"]
    body = status(http.get(CMS, params={"continue": token, "resourceVersion": "1"}), 400)
    assert body["message"] == "specifying resource version is not allowed when using continue"
    page = http.get(CMS, params={"continue": token, "resourceVersion": "0", "limit": "1"})
    assert page.status_code == 200 and [i["metadata"]["name"] for i in orjson.loads(page.content)["items"]] == ["b"]


# ------------------------------------------------------------------------------------- watch options
# apimachinery validateWatchOptions (with the WatchList feature on, as kemu serves sendInitialEvents): on a watch,
# resourceVersionMatch is allowed only as NotOlderThan beside sendInitialEvents, which requires it. Several
# refusals make one 422 whose message lists them in brackets (field.ErrorList.ToAggregate).
INVALID = 'ListOptions.meta.k8s.io "" is invalid: '
FORBIDDEN_WITHOUT_INITIAL = ("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
                             "sendInitialEvents is provided")
INITIAL_NEEDS_MATCH = "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to " \
                      "NotOlderThan"


def unsupported(match: str) -> str:
    return f'resourceVersionMatch: Unsupported value: "{match}": supported values: "NotOlderThan"'


@pytest.mark.parametrize(("params", "causes"), [
    ({"resourceVersionMatch": "NotOlderThan"}, [FORBIDDEN_WITHOUT_INITIAL]),
    ({"resourceVersion": "5", "resourceVersionMatch": "NotOlderThan"}, [FORBIDDEN_WITHOUT_INITIAL]),
    ({"resourceVersion": "5", "resourceVersionMatch": "Exact"}, [FORBIDDEN_WITHOUT_INITIAL, unsupported("Exact")]),
    ({"sendInitialEvents": "true"}, [INITIAL_NEEDS_MATCH]),
    ({"sendInitialEvents": "true", "resourceVersionMatch": "Exact"}, [INITIAL_NEEDS_MATCH, unsupported("Exact")]),
    ({"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "continue": "x"},
     ["resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"]),
], ids=["not-older-than", "not-older-than-with-rv", "exact", "initial-events-without-match",
        "initial-events-with-exact", "with-continue"])
def test_refused_watch_options(http: httpx.Client, params: dict[str, str], causes: list[str]) -> None:
    body = status(http.get(CMS, params={"watch": "true", "timeoutSeconds": "1", **params}), 422)
    joined = ", ".join(causes)
    assert body["message"] == INVALID + (f"[{joined}]" if len(causes) > 1 else joined)
    assert body["reason"] == "Invalid"
    # The name is "" and StatusDetails.name is omitempty.
    assert (body["details"]["kind"], body["details"]["group"]) == ("ListOptions", "meta.k8s.io")
    assert "name" not in body["details"]
    assert [f'{c["field"]}: {c["message"]}' for c in body["details"]["causes"]] == causes


def test_watch_with_resource_version_match_through_the_official_client(v1: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as e:
        v1.list_namespaced_config_map("default", watch=True, resource_version_match="NotOlderThan",
                                      timeout_seconds=1, _preload_content=False)
    assert e.value.status == 422
    body = orjson.loads(e.value.body)
    assert body["message"] == INVALID + FORBIDDEN_WITHOUT_INITIAL
    assert body["details"]["causes"][0]["field"] == "resourceVersionMatch"


def test_watch_list_with_not_older_than_streams(http: httpx.Client, core: ServerCore) -> None:
    cm(core, "a")
    params = {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
              "allowWatchBookmarks": "true", "timeoutSeconds": "1"}
    r = http.get(CMS, params=params)
    assert r.status_code == 200, r.text
    events = [orjson.loads(line) for line in r.content.splitlines() if line]
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events[:1]] == [("ADDED", "a")]
    end = [e for e in events if e["type"] == "BOOKMARK"
           and (e["object"]["metadata"].get("annotations") or {}).get("k8s.io/initial-events-end") == "true"]
    assert len(end) == 1
