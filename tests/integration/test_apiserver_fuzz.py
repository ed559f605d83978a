"""Bad input never 500s: property-based fuzzing of the API server with mutated manifests of every kind.

For each kind the API server serves (built-ins, the autoscaling/v1 version of the HPA, the
review kinds, and the custom resources VPA and KEDA's four) hypothesis takes the kind's valid
seed (:mod:`tests.manifest_seeds`), mutates it — wrong JSON types, huge and negative numbers,
quantities such as ``1e1000``, odd unicode, very long strings, deep nesting, deleted fields,
null where an object belongs, unknown fields — and sends it through a real API server process
(uvicorn over HTTP) as a create (POST), a replace (PUT of a stored object) and a patch (JSON,
merge and, for built-ins, strategic merge). The property, as upstream's API machinery
guarantees: the answer is a 2xx, or a 4xx whose body is a ``meta.k8s.io/v1 Status`` of that
code, and a 4xx stores nothing (the store's resourceVersion does not move). After a 2xx the
object must still read back, as JSON and as a kubectl Table, and its collection must list.

Reproducible in CI: a fixed budget of examples per kind, ``derandomize=True`` (the same examples
every run), no deadline (a loaded machine must not fail the property). Local fuzzing:
``KEMU_FUZZ_EXAMPLES=2000`` runs that many random examples per kind (not derandomized).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator.api import kinds
from emulator.api.kinds import REVIEW_GROUPS, Kind
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis
from emulator.store.store import Store
from tests.manifest_seeds import seeds

pytestmark = pytest.mark.integration

Obj = dict[str, Any]
Path_ = tuple[str | int, ...]

SEEDS = seeds()
KINDS = sorted(SEEDS, key=lambda k: (k.group, k.plural, k.version))

_LONG_RUN = os.environ.get("KEMU_FUZZ_EXAMPLES")
EXAMPLES = int(_LONG_RUN) if _LONG_RUN else 6  # per kind; the default run takes about 30 s
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=not _LONG_RUN,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)

JSON = "application/json"
PATCH_TYPES = {"json": "application/json-patch+json", "merge": "application/merge-patch+json",
               "strategic": "application/strategic-merge-patch+json"}


# ------------------------------------------------------------------------------------------- strategies
# Numbers a Go decoder would refuse or overflow on, and the edges of int32/int64 fields.
_NUMBERS = [0, -1, -2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -2**63 - 1, 2**64, 10**30, 10**400, 10**4000,
            1e308, -1e308, 5e-324, 0.5, -0.0, 1.5e300]
# Quantity spellings past upstream's ParseQuantity limits or kemu's exact-integer bound.
_QUANTITIES = ["1e1000", "-1e1000", "1e2147483647", "1e-2147483648", "1e9223372036854775807",
               "1e9223372036854775808", "99999999999999999999999Ei", "NaN", "Inf", "-Inf", "0x10", "1.5.5",
               "-1", "-100m", "1e-1000", "1e991", "", " ", "+", ".", "e", "1Qi", "1 Gi"]
_ODD_STRINGS = ["\x00", "\u202e\u202d", "\ufeff", "🙂" * 40, "a\nb", "é", "\u0130", "ǅ", "Ⅻ", "../..", "a/b",
                "$(VAR)", "%00", "{}", "[]", "null", "true", "-", ".", "A" * 64, "a" * 254, "a" * 64,
                "a" * 253 + ".b", "x" * 70_000, "é" * 5_000, "10.0.0.999", "::1", "2001:db8::1/200"]


def _deep(depth: int, leaf: Any, as_list: bool) -> Any:
    for _ in range(depth):
        leaf = [leaf] if as_list else {"a": leaf}
    return leaf


scalars = st.one_of(
    st.none(), st.booleans(), st.sampled_from(_NUMBERS), st.integers(), st.floats(allow_nan=False),
    st.sampled_from(_QUANTITIES), st.sampled_from(_ODD_STRINGS), st.text(max_size=20),
)
nested = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c,
                                                                                      max_size=3), max_leaves=6)
deep = st.builds(_deep, st.sampled_from([40, 101, 254, 900, 2000]), scalars, st.booleans())
weird_values = st.one_of(scalars, nested, deep, st.just({}), st.just([]))


def all_paths(doc: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every node of a JSON document, the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.extend(all_paths(v, (*prefix, k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.extend(all_paths(v, (*prefix, i)))
    return out


def _has(node: Any, part: str | int) -> bool:
    return ((isinstance(node, dict) and isinstance(part, str) and part in node) or
            (isinstance(node, list) and isinstance(part, int) and part < len(node)))


def _parent(doc: Any, path: Path_) -> Any:
    node = doc
    for part in path[:-1]:
        if not _has(node, part):
            return None
        node = node[part]
    return node


def mutate(doc: Any, path: Path_, op: str, value: Any) -> Any:
    """Apply one mutation; a path an earlier mutation removed is skipped."""
    if not path:
        return value if op == "replace" else doc
    parent, last = _parent(doc, path), path[-1]
    if not _has(parent, last):
        return doc
    if op == "delete":
        del parent[last]
    elif op == "null":
        parent[last] = None
    elif op == "add":
        node = parent[last]
        if isinstance(node, dict):
            node["zz-fuzz" if not node else "unknownField"] = value
        elif isinstance(node, list):
            node.append(value)
        else:
            parent[last] = value
    else:
        parent[last] = value
    return doc


def pick(draw: st.DrawFn, paths: list[Path_]) -> Path_:
    """One of ``paths``, drawn as an index so that what is drawn does not depend on the document (stored
    objects differ between runs in uid and timestamps; hypothesis replays a failure by its draws)."""
    return paths[draw(st.integers(0, 2**16)) % len(paths)]


@st.composite
def mutated(draw: st.DrawFn, doc: Obj) -> Any:
    out: Any = copy.deepcopy(doc)
    paths = all_paths(out)
    for _ in range(draw(st.integers(1, 3))):
        path = pick(draw, paths)
        op = draw(st.sampled_from(["replace", "replace", "delete", "null", "add"]))
        out = mutate(out, path, op, draw(weird_values))
    return out


def encode(body: Any, ascii_only: bool) -> bytes:
    """JSON text of ``body``: lone surrogates and NaN are sent as the client wrote them (the server must
    refuse them with 400); non-ASCII as UTF-8 unless ``ascii_only`` or not encodable."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))  # the encoder recurses once per level of the deep documents
    try:
        if not ascii_only:
            try:
                return json.dumps(body, ensure_ascii=False).encode()
            except (UnicodeEncodeError, ValueError):
                pass
        return json.dumps(body).encode()
    finally:
        sys.setrecursionlimit(limit)


def json_pointer(path: Path_) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


# ------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    log = tmp_path_factory.mktemp("fuzz") / "apiserver.log"
    # AlwaysAllow: with RBAC the server aggregates ClusterRoles in the background (a write the "a 4xx stores
    # nothing" check would blame on the request); authorization has tests of its own.
    settings = ServerSettings(redis_url=redis_server.url, port=0, log_level="error", authorization_mode="AlwaysAllow")
    proc = ApiServerProcess(settings, log_path=log)
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def core(redis_url: str, server: ApiServerProcess) -> Iterator[ServerCore]:
    c = ServerCore(Store.connect(redis_url))
    c.bootstrap()
    yield c
    c.store.close()


@pytest.fixture
def http(server: ApiServerProcess, core: ServerCore) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def collection(kind: Kind, namespace: str) -> str:
    base = f"/api/{kind.version}" if not kind.group else f"/apis/{kind.group}/{kind.version}"
    return f"{base}/namespaces/{namespace}/{kind.plural}" if kind.namespaced else f"{base}/{kind.plural}"


def server_log_tail(server: ApiServerProcess) -> str:
    path = server.log_path
    if path is None or not Path(path).exists():
        return ""
    return Path(path).read_text(errors="replace")[-3000:]


class Checker:
    """Sends one request and checks the property; remembers what it saw for the report."""

    def __init__(self, http: httpx.Client, core: ServerCore, server: ApiServerProcess, kind: Kind, ns: str) -> None:
        self.http, self.core, self.server, self.kind, self.ns = http, core, server, kind, ns
        self.codes: dict[int, int] = {}

    def send(self, method: str, url: str, content: bytes, content_type: str) -> httpx.Response:
        rv = self.core.store.current_rv()
        r = self.http.request(method, url, content=content, headers={"Content-Type": content_type})
        self.codes[r.status_code] = self.codes.get(r.status_code, 0) + 1
        what = f"{method} {url} ({content_type}) -> {r.status_code}: {r.text[:400]}\nsent: {content[:1500]!r}"
        assert r.status_code < 500, f"{what}\nserver log:\n{server_log_tail(self.server)}"
        assert r.status_code < 300 or 400 <= r.status_code < 500, what
        if r.status_code >= 400:
            body = r.json()
            assert body.get("kind") == "Status" and body.get("apiVersion") == "v1", what
            assert body.get("status") == "Failure" and body.get("code") == r.status_code, what
            assert isinstance(body.get("reason"), str) and isinstance(body.get("message"), str), what
            assert self.core.store.current_rv() == rv, f"a {r.status_code} stored something: {what}"
        elif self.kind.group not in REVIEW_GROUPS:
            self.read_back(r.json(), what)
        return r

    def read_back(self, obj: Any, what: str) -> None:
        """A stored object must read back as JSON and as a Table, and its collection must list."""
        name = ((obj or {}).get("metadata") or {}).get("name") if isinstance(obj, dict) else None
        urls = [collection(self.kind, self.ns)]
        if isinstance(name, str) and name:
            urls.append(f"{urls[0]}/{name}")
        table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        for url in urls:
            for accept in (JSON, table):
                r = self.http.get(url, headers={"Accept": accept})
                assert r.status_code == 200, (f"GET {url} ({accept}) after {what}\n-> {r.status_code}: {r.text[:400]}"
                                              f"\nserver log:\n{server_log_tail(self.server)}")


# ------------------------------------------------------------------------------------------- the property
@pytest.mark.parametrize("kind", KINDS, ids=[f"{k.plural}.{k.group or 'core'}.{k.version}" for k in KINDS])
def test_mutated_manifests_never_answer_500(kind: Kind, http: httpx.Client, core: ServerCore,
                                            server: ApiServerProcess) -> None:
    ns = "fuzz"
    assert http.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
    seed = SEEDS[kind]
    url = collection(kind, ns)
    check = Checker(http, core, server, kind, ns)
    review = kind.group in REVIEW_GROUPS
    counter = itertools.count()

    def named(body: Obj, name: str) -> Obj:
        out = copy.deepcopy(body)
        if not review:
            out["metadata"] = {**out.get("metadata", {}), "name": name}
        if kind.kind == "ScaledObject":  # KEDA's webhook: one ScaledObject per workload
            out["spec"]["scaleTargetRef"]["name"] = f"web-{name}"
        return out

    @FUZZ
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        n = next(counter)
        ascii_only = data.draw(st.booleans(), "ascii")
        # create: a mutated manifest
        check.send("POST", url, encode(data.draw(mutated(named(seed, f"new-{n}")), "create body"), ascii_only), JSON)
        if review:
            return
        # the valid object the replace and the patches start from
        base = http.post(url, content=encode(named(seed, f"base-{n}"), True), headers={"Content-Type": JSON})
        assert base.status_code == 201, base.text
        stored = base.json()
        item = f"{url}/base-{n}"
        # replace: the stored object, mutated
        check.send("PUT", item, encode(data.draw(mutated(stored), "replace body"), ascii_only), JSON)
        # patch: JSON patch operations at any node, or a merge / strategic merge patch of a mutated object
        patch_type = data.draw(st.sampled_from(["json", "merge"] if kind.custom_resource
                                               else ["json", "merge", "strategic"]), "patch type")
        current = http.get(item).json()
        if patch_type == "json":
            ops = [{"op": data.draw(st.sampled_from(["add", "replace", "remove", "test", "move", "copy"])),
                    "path": json_pointer(pick(data.draw, all_paths(current))),
                    "value": data.draw(weird_values), "from": "/metadata/labels"}
                   for _ in range(data.draw(st.integers(1, 3)))]
            patch: Any = data.draw(st.one_of(st.just(ops), weird_values), "json patch")
        else:
            patch = data.draw(st.one_of(mutated(current), weird_values), "merge patch")
        check.send("PATCH", item, encode(patch, ascii_only), PATCH_TYPES[patch_type])

    run()
    assert sum(check.codes.values()) > 0, "the fuzzer sent nothing"
    # The mutations must not all be rejected before validation: some bodies are accepted, some refused.
    assert any(400 <= c < 500 for c in check.codes), check.codes


def test_every_served_kind_has_a_seed() -> None:
    assert {k.resource + "/" + k.version for k in kinds.served_kinds()} == {
        k.resource + "/" + k.version for k in SEEDS}


# ------------------------------------------------------------------------------------------- quantities
# A quantity past kemu's exact-integer bound (validation/resources.py: below 1e992; upstream's ParseQuantity
# has no upper bound) in each kind's quantity fields: 422 Invalid naming the field, and nothing stored.
HUGE = "1e1000"


def _set(body: Obj, path: Path_, value: Any) -> Obj:
    out = copy.deepcopy(body)
    node: Any = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize(("kind", "path", "field"), [
    (kinds.POD, ("spec", "containers", 0, "resources", "requests", "cpu"),
     "spec.containers[0].resources.requests[cpu]"),
    (kinds.POD, ("spec", "containers", 1, "resources", "limits", "memory"),
     "spec.containers[1].resources.limits[memory]"),
    (kinds.DEPLOYMENT, ("spec", "template", "spec", "containers", 0, "resources", "limits", "cpu"),
     "spec.template.spec.containers[0].resources.limits[cpu]"),
    (kinds.RESOURCEQUOTA, ("spec", "hard", "requests.cpu"), "spec.hard[requests.cpu]"),
    (kinds.LIMITRANGE, ("spec", "limits", 0, "max", "cpu"), "spec.limits[0].max[cpu]"),
    (kinds.PERSISTENTVOLUMECLAIM, ("spec", "resources", "requests", "storage"), "spec.resources[storage]"),
    # node/validation validateOverhead checks podFixed as ResourceRequirements{Limits: ...} at "overhead".
    (kinds.RUNTIMECLASS, ("overhead", "podFixed", "cpu"), "overhead.limits[cpu]"),
    (kinds.HORIZONTALPODAUTOSCALER, ("spec", "metrics", 1, "pods", "target", "averageValue"),
     "spec.metrics[1].pods.target.averageValue"),
    (kinds.VERTICALPODAUTOSCALER, ("spec", "resourcePolicy", "containerPolicies", 0, "maxAllowed", "memory"),
     "spec.resourcePolicy.containerPolicies[0].maxAllowed[memory]"),
], ids=["pod-request", "pod-limit", "deployment-template", "quota", "limitrange", "pvc", "runtimeclass", "hpa",
        "vpa"])
def test_a_quantity_of_1e1000_is_422_naming_the_field(kind: Kind, path: Path_, field: str, http: httpx.Client,
                                                      core: ServerCore) -> None:
    assert http.post("/api/v1/namespaces", json={"metadata": {"name": "fuzz"}}).status_code == 201
    body = _set(SEEDS[kind], path, HUGE)
    rv = core.store.current_rv()
    r = http.post(collection(kind, "fuzz"), content=encode(body, True), headers={"Content-Type": JSON})
    assert r.status_code == 422, r.text
    status = r.json()
    assert status["kind"] == "Status" and status["reason"] == "Invalid"
    assert field in [c["field"] for c in status["details"]["causes"]], status
    assert f'Invalid value: "{HUGE}"' in status["message"]
    assert core.store.current_rv() == rv


# ------------------------------------------------------------------------------------------- list options
_LIST_PARAMS = {
    "resourceVersion": ["", "0", "1", "00", "-1", "abc", "18446744073709551616", "99999999999", " 1", "1.5"],
    "resourceVersionMatch": ["", "Exact", "NotOlderThan", "exact", "Newest"],
    "limit": ["", "0", "1", "2", "-1", "x", "99999999999999999999"],
    "continue": ["", "garbage", "eyJydiI6IDEsICJzdGFydCI6ICJ4In0=", "%%%"],
    "labelSelector": ["", "app=web", "app in (a,b)", "!!", "a=" + "x" * 70, "app notin ()"],
    "fieldSelector": ["", "metadata.name=x", "spec.nodeName=n1", "status.phase!=Running", "nope=1", "=="],
    "sendInitialEvents": ["", "true", "maybe"],
    "timeoutSeconds": ["", "1", "-5", "x"],
}


@settings(FUZZ, max_examples=EXAMPLES * 8)  # one cheap request per example
@given(params=st.fixed_dictionaries({}, optional={k: st.one_of(st.sampled_from(v), st.text(max_size=12))
                                                   for k, v in _LIST_PARAMS.items()}),
       plural=st.sampled_from(["pods", "configmaps", "nodes"]), table=st.booleans())
def test_list_options_never_answer_500(server: ApiServerProcess, http: httpx.Client,
                                       params: dict[str, str], plural: str, table: bool) -> None:
    """LIST (resourceVersion / resourceVersionMatch / paging / selectors) with any options: 200 or a 4xx Status."""
    path = f"/api/v1/{plural}" if plural == "nodes" else f"/api/v1/namespaces/default/{plural}"
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json" if table else JSON
    r = http.get(path, params=params, headers={"Accept": accept})
    what = f"{params} -> {r.status_code}: {r.text[:300]}\n{server_log_tail(server)}"
    if r.status_code == 200:
        return
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == r.status_code, what
    # The one 5xx upstream answers a LIST with on purpose: a resourceVersion the store has not reached
    # (storage.NewTooLargeResourceVersionError, a 504 Timeout the client retries).
    too_large = r.status_code == 504 and body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert 400 <= r.status_code < 500 or too_large, what


# ------------------------------------------------------------------------------------------- found by the fuzzer
def _with(kind: Kind, path: Path_, value: Any) -> Obj:
    return _set(SEEDS[kind], path, value)


@pytest.mark.parametrize(("kind", "body", "code", "fragment"), [
    # orjson parses 1024 levels but serializes 254: managed-fields tracking failed on the copy (500).
    (kinds.CONFIGMAP, _with(kinds.CONFIGMAP, ("data",), _deep(900, None, False)), 400, "exceeded max depth of 100"),
    # A float subject name was stored, then the RoleBinding table printer failed joining names (500 on LIST).
    (kinds.ROLEBINDING, _with(kinds.ROLEBINDING, ("subjects", 0, "name"), 1.5), 400,
     "cannot unmarshal number 1.5 into Go struct field Subject.subjects.name of type string"),
    # Reviews merged a non-object metadata into their answer (500).
    (kinds.SELFSUBJECTREVIEW, _with(kinds.SELFSUBJECTREVIEW, ("metadata",), True), 400,
     "cannot unmarshal bool into Go struct field SelfSubjectReview.metadata of type v1.ObjectMeta"),
    # HPA validation hashed every metric type into a set: a dict type was a 500.
    (kinds.HORIZONTALPODAUTOSCALER, _with(kinds.HORIZONTALPODAUTOSCALER, ("spec", "metrics", 0, "type"), {}), 422,
     "spec.metrics[0].type"),
    # QoS classification converted 1e1000 to integer nanounits after validation had accepted it (500).
    (kinds.POD, _with(kinds.POD, ("spec", "containers", 0, "resources", "limits", "cpu"), "1e1000"), 422,
     "spec.containers[0].resources.limits[cpu]"),
], ids=["nesting-900", "float-subject-name", "review-metadata-bool", "hpa-metric-type-object", "quantity-1e1000"])
def test_bodies_that_were_500s(kind: Kind, body: Obj, code: int, fragment: str, http: httpx.Client,
                               core: ServerCore) -> None:
    assert http.post("/api/v1/namespaces", json={"metadata": {"name": "fuzz"}}).status_code == 201
    rv = core.store.current_rv()
    r = http.post(collection(kind, "fuzz"), content=encode(body, True), headers={"Content-Type": JSON})
    assert r.status_code == code, r.text
    assert r.json()["kind"] == "Status" and fragment in r.text
    assert core.store.current_rv() == rv
    if kind.group not in REVIEW_GROUPS:
        table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        assert http.get(collection(kind, "fuzz"), headers={"Accept": table}).status_code == 200
