"""Ray Data: its default share of the object store, its console handlers, and the autoscaling coordinator that
sizes elastic worker groups.

Internals ``data-object-store-fraction`` (:func:`data_object_store_fraction`), ``ray-data-file-handler``
(:func:`ray_data_console_handlers`) and ``train-autoscaling-coordinator`` (:func:`hold_in_coordinator`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from importlib import import_module

from hpsearch.runtime.internals.contract_checks import ContractBroken, _mentions, _parameters, _resolve
from hpsearch.runtime.internals.registry import (
    COORDINATOR,
    DATA_OBJECT_STORE_FRACTION,
    RAY_DATA_FILE_HANDLER,
    available,
)

__all__ = ["data_object_store_fraction", "hold_in_coordinator", "ray_data_console_handlers"]


def _check_data_fraction() -> None:
    manager = _resolve("ray.data._internal.execution.resource_manager:ResourceManager")
    value = getattr(manager, "DEFAULT_OBJECT_STORE_MEMORY_LIMIT_FRACTION", None)
    if value != DATA_OBJECT_STORE_FRACTION:
        raise ContractBroken(
            "Ray Data's ResourceManager.DEFAULT_OBJECT_STORE_MEMORY_LIMIT_FRACTION is "
            f"{value!r}, hpsearch assumes {DATA_OBJECT_STORE_FRACTION}"
        )
    _resolve("ray.data:DataContext")


def _check_ray_data_handler() -> None:
    _resolve(f"ray.data._internal.logging:{RAY_DATA_FILE_HANDLER}")


_COORDINATOR_BASE = "ray.data._internal.cluster_autoscaler.base_autoscaling_coordinator"
_TRAIN_COORDINATOR_CLIENT = (
    "ray.train.v2._internal.execution.scaling_policy.autoscaling_coordinator_client:TrainAutoscalingCoordinatorClient"
)


def _check_coordinator() -> None:
    _resolve(f"{COORDINATOR}:get_or_create_autoscaling_coordinator")
    actor = f"{COORDINATOR}:_AutoscalingCoordinatorActor"
    _parameters(f"{actor}.request_resources", "requester_id", "resources", "expire_after_s", "priority")
    _parameters(f"{actor}.cancel_request", "requester_id")
    if getattr(_resolve(f"{_COORDINATOR_BASE}:ResourceRequestPriority"), "HIGH", None) is None:
        raise ContractBroken(f"{_COORDINATOR_BASE}.ResourceRequestPriority has no HIGH")
    # The coordinator shares the room in the order of priority, then of the first request: the drivers' request,
    # at Ray Train's own priority and made before the trial's, is counted first.
    _mentions(f"{COORDINATOR}:OngoingRequest.__lt__", "self.priority", "self.first_request_time")
    _mentions(f"{_TRAIN_COORDINATOR_CLIENT}.send_resource_request", "ResourceRequestPriority.HIGH")
    # An elastic worker group is sized from what the coordinator reserved for it.
    _mentions(
        "ray.train.v2._internal.execution.scaling_policy.elastic:ElasticScalingPolicy.make_decision_for_non_running_worker_group",
        "self._get_reserved_resources()",
    )


def data_object_store_fraction() -> float:
    """The share of the object store one Ray Data executor takes by default (internal ``data-object-store-fraction``)."""
    # lazy: a missing internal turns its feature off; it never fails the import
    from ray.data import DataContext

    override = DataContext.get_current().override_object_store_memory_limit_fraction
    return DATA_OBJECT_STORE_FRACTION if override is None else float(override)


def ray_data_console_handlers(handlers: Sequence[logging.Handler]) -> list[logging.Handler]:
    """Of Ray Data's logging handlers, those writing to the console: all but the one writing ``ray-data.log``.

    Internal ``ray-data-file-handler``; without it none is returned (nothing is muted, so the
    log file never loses a line).
    """
    if not available("ray-data-file-handler"):
        return []
    return [h for h in handlers if type(h).__name__ != RAY_DATA_FILE_HANDLER]


def hold_in_coordinator(
    requester_id: str, bundles: Sequence[Mapping[str, float]], *, expire_after_s: float, timeout_s: float
) -> bool:
    """Tell Ray's autoscaling coordinator that ``bundles`` are held (internal ``train-autoscaling-coordinator``).

    The request is made at Ray Train's own priority, so it is counted before every request made after
    it, and it lapses ``expire_after_s`` after its last repetition. An empty ``bundles`` withdraws it.
    ``False`` when the internal is missing or the coordinator did not answer within ``timeout_s``.
    """
    if not available("train-autoscaling-coordinator"):
        return False
    # lazy: Ray Data's modules load only in a trial driver of an elastic search
    import ray

    coordinator = import_module(COORDINATOR).get_or_create_autoscaling_coordinator()
    try:
        if not bundles:
            ray.get(coordinator.cancel_request.remote(requester_id=requester_id), timeout=timeout_s)
            return True
        priority = import_module(_COORDINATOR_BASE).ResourceRequestPriority.HIGH
        ray.get(
            coordinator.request_resources.remote(
                requester_id=requester_id,
                resources=[dict(b) for b in bundles],
                expire_after_s=expire_after_s,
                priority=priority,
            ),
            timeout=timeout_s,
        )
    except Exception:  # noqa: BLE001 - a busy or restarting coordinator: the caller tries again later
        return False
    return True
