"""A kubelet's batched pod status writes (``ServerCore.update_status_many``) when the pods changed under it.

Upstream's status manager writes a pod's status against the pod it last saw and, when the
apiserver says the pod changed (409), reads it again and puts its status on the current pod
(pkg/kubelet/status/status_manager.go syncPod: Get, then PatchPodStatus). kemu does that for a
whole batch of stale writes at once: the other writer's change is kept, the status lands, a pod
gone in between answers 404, one whose stored status already says it is left as it is.
"""

from __future__ import annotations

import pytest

from emulator.api import errors
from emulator.api.kinds import POD
from emulator.server.core import ServerCore
from tests import builders as b

pytestmark = pytest.mark.integration

RUNNING = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


@pytest.mark.parametrize("stale", [1, 3], ids=["one-stale", "three-stale"])
def test_stale_status_writes_land_on_the_current_pods_keeping_the_other_writers_change(
        core: ServerCore, stale: int) -> None:
    seen = [core.create(POD, b.pod(f"p-{i}")) for i in range(4)]  # what the kubelet last saw
    for pod in seen[:stale]:  # another writer labels them after the kubelet read them
        core.update(POD, {**pod, "metadata": {**pod["metadata"], "labels": {"by": "other"}}})
    results = core.update_status_many(POD, [{**pod, "status": RUNNING} for pod in seen])
    for i, result in enumerate(results):
        assert not isinstance(result, errors.StatusError), result
        stored = core.get(POD, "default", f"p-{i}")
        assert result == stored
        assert stored["status"] == RUNNING
        assert stored["metadata"]["labels"] == ({"by": "other"} if i < stale else {})
        # the stale ones were written on top of the other writer's version, the rest on the kubelet's
        assert int(stored["metadata"]["resourceVersion"]) > int(seen[i]["metadata"]["resourceVersion"]) + (i < stale)


def test_a_pod_gone_in_between_answers_not_found_and_one_already_reported_is_left_as_it_is(core: ServerCore) -> None:
    seen = [core.create(POD, b.pod(f"p-{i}")) for i in range(3)]
    core.update(POD, {**seen[0], "metadata": {**seen[0]["metadata"], "labels": {"by": "other"}}})
    core.store.delete(POD, "default", "p-0")  # gone since the kubelet read it
    for pod in seen[1:]:  # someone else already wrote the very status the kubelet is about to write
        core.update_status(POD, {**pod, "status": RUNNING})
    reported = {i: core.get(POD, "default", f"p-{i}") for i in (1, 2)}
    results = core.update_status_many(POD, [{**pod, "status": RUNNING} for pod in seen])
    assert isinstance(results[0], errors.StatusError) and results[0].code == 404
    assert results[1:] == [reported[1], reported[2]]  # nothing written: the store already says it
    assert [core.get(POD, "default", f"p-{i}") for i in (1, 2)] == [reported[1], reported[2]]
