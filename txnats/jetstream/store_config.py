"""Typed configurations of the key-value and object stores: :class:`KeyValueConfig` and
:class:`ObjectStoreConfig`, records like :mod:`txnats.jetstream.config`'s (durations in
seconds; a field this version does not know is kept in ``extra``), laid out as nats.go's
``KeyValueConfig`` and ``ObjectStoreConfig`` are in JSON.

``js.create_key_value(KeyValueConfig(bucket="b", history=5))`` and
``js.create_key_value("b", history=5)`` do the same; so do the object store's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from txnats.jetstream._config_core import JsonObject, Seconds

__all__ = ["KeyValueConfig", "ObjectStoreConfig"]


@dataclasses.dataclass
class KeyValueConfig(JsonObject):
    """A key-value bucket's configuration (ADR-8, ADR-48); see
    :func:`txnats.jetstream.kv.bucket_stream_config` for what each field does."""

    bucket: str | None = None
    description: str | None = None
    #: Values kept per key (1 to 64).
    history: int | None = None
    #: Seconds a value is kept (0 or ``None``: for ever).
    ttl: Seconds | None = None
    max_value_size: int | None = None
    max_bytes: int | None = None
    #: ``"file"`` or ``"memory"``.
    storage: str | None = None
    replicas: int | None = None
    compression: bool | None = None
    placement: dict[str, Any] | None = None
    republish: dict[str, Any] | None = None
    #: Seconds a limit marker is kept; set, the bucket takes per-key TTLs (ADR-48).
    limit_marker_ttl: Seconds | None = None
    #: A bucket name, or ``{"bucket": ..., "domain": ...}``.
    mirror: Any = None
    #: Bucket names or dicts as for ``mirror``.
    sources: list[Any] | None = None
    metadata: dict[str, str] | None = None

    def create_arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``create_key_value`` this record stands for."""
        names = (
            "description", "history", "ttl", "max_value_size", "max_bytes", "storage",
            "replicas", "compression", "placement", "republish", "limit_marker_ttl",
            "mirror", "sources", "metadata",
        )
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}


@dataclasses.dataclass
class ObjectStoreConfig(JsonObject):
    """An object store's configuration (ADR-20); see
    :meth:`txnats.jetstream.object_store.ObjectStore.create`."""

    bucket: str | None = None
    description: str | None = None
    #: Seconds an object is kept (0 or ``None``: for ever).
    ttl: Seconds | None = None
    max_bytes: int | None = None
    storage: str | None = None
    replicas: int | None = None
    compression: bool | None = None
    placement: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None

    def create_arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``create_object_store`` this record stands for."""
        names = (
            "description", "ttl", "max_bytes", "storage", "replicas", "compression",
            "placement", "metadata",
        )
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}
