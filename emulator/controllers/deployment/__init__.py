"""The Deployment controller: rolls a Deployment's pod template out through ReplicaSets.

A re-implementation of upstream ``pkg/controller/deployment/`` on kemu's
controller runtime, one module per upstream file: :mod:`.deployment_controller`
(``deployment_controller.go``: handlers and reconcile), :mod:`.sync`
(``sync.go``), :mod:`.rolling`, :mod:`.recreate`, :mod:`.rollback`,
:mod:`.progress` and :mod:`.util` (``util/deployment_util.go``). The pieces, as
upstream:

* **ReplicaSets per template.** The *new* ReplicaSet is the one whose template
  equals the Deployment's, ignoring the ``pod-template-hash`` label
  (``EqualIgnoreHash``; the oldest wins if several do). It is created on demand
  as ``<deployment>-<hash>`` where the hash is ``ComputeHash``: FNV-32a over the
  template plus ``status.collisionCount``, printed in decimal and mapped through
  ``rand.SafeEncodeString``'s alphabet — so names look like ``web-7c5ddbdf54``.
  (Upstream hashes Go's ``spew`` dump of the struct; kemu hashes the template's
  canonical JSON, so the characters differ from a real cluster's, the shape and
  the collision handling do not.) The hash is added as a ``pod-template-hash``
  label to the ReplicaSet, its selector and its template. A name taken by a
  ReplicaSet with another template bumps ``collisionCount`` and retries.
* **Revisions.** Each new ReplicaSet gets ``deployment.kubernetes.io/revision``
  = max(old revisions) + 1, copied to the Deployment; a ReplicaSet brought back
  by a rollback keeps its old numbers in ``deployment.kubernetes.io/revision-history``.
  The Deployment's other annotations (``kubernetes.io/change-cause`` ...) are
  copied to its new ReplicaSet, which is what ``kubectl rollout history`` and
  ``kubectl rollout undo`` read; ``desired-replicas`` / ``max-replicas``
  annotations drive proportional scaling. ReplicaSets beyond
  ``revisionHistoryLimit`` that are scaled to zero are deleted, oldest revision
  first (``cleanupDeployment``).
* **RollingUpdate** (``rolloutRolling``): scale the new ReplicaSet up to at most
  ``replicas + maxSurge`` pods in all, then scale old ones down while at least
  ``replicas - maxUnavailable`` pods stay available — unhealthy old pods first
  (``cleanupUnhealthyReplicas``). Percentages resolve against ``replicas``:
  surge rounds up, unavailable down, and if both come to 0, unavailable is 1
  (``ResolveFenceposts``).
* **Recreate**: scale every old ReplicaSet to zero, wait until none of their
  pods is left running, then create/scale the new one.
* **Scaling** (``sync``/``scale``) while a rollout is under way spreads the
  change over the active ReplicaSets in proportion to their size; ``paused``
  Deployments only scale.
* **Status and conditions** (``calculateStatus``, ``syncRolloutStatus``):
  replicas, updatedReplicas, readyReplicas, availableReplicas,
  unavailableReplicas, observedGeneration, collisionCount; ``Available``
  (``MinimumReplicasAvailable`` / ``MinimumReplicasUnavailable``) and
  ``Progressing`` (``NewReplicaSetCreated``, ``FoundNewReplicaSet``,
  ``ReplicaSetUpdated``, ``NewReplicaSetAvailable``, ``ProgressDeadlineExceeded``,
  ``DeploymentPaused`` / ``DeploymentResumed``, ``ReplicaSetCreateError``), with
  ``progressDeadlineSeconds`` measured on the cluster clock: a Deployment with no
  progress is re-checked when its deadline is due (``requeueStuckDeployment``).
* **Rollback.** ``kubectl rollout undo`` is client-side for apps/v1 (it copies
  an old ReplicaSet's template and annotations into the Deployment), so it needs
  only the revision annotations and ``pod-template-hash`` labels above. The old
  ``deprecated.deployment.rollback.to`` annotation is honoured too (``rollback.go``).

Writes: a Deployment's annotations (the revision) and status are written as two
calls — kemu's status subresource does not carry metadata, upstream's does —
and the cached copies in one pass are refreshed with each write's result, so one
pass does not conflict with itself. Failed passes are retried with the default
controller rate limiter and dropped after 15 retries, as upstream.
"""


from __future__ import annotations

from emulator.controllers.deployment.deployment_controller import DeploymentController, new_controller

__all__ = ["DeploymentController", "new_controller"]
