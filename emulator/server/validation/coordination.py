"""Lease validation: ObjectMeta only (upstream ``pkg/apis/coordination/validation`` also checks the spec)."""

from __future__ import annotations

from emulator.server.validation.registry import metadata_only, register

register("leases.coordination.k8s.io")(metadata_only)
