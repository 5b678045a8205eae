"""Explicit workload registry: built-in workloads plus user plug-ins named 'module:attr'."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from kernels.matchain.workload import matchain_workload
from kernels.softmax.workload import softmax_workload
from kernels.track3.workload import track3_workload
from kernels.workload import Workload, WorkloadFactory


class UnknownWorkloadError(ValueError):
    """A workload name that resolves to no workload, or to more than one."""


def builtin_workloads() -> dict[str, WorkloadFactory]:
    """The workloads that ship with Ratchet, by name."""
    return {"track3": track3_workload, "softmax": softmax_workload, "matchain": matchain_workload}


def resolve_workload(name: str, registry: Mapping[str, WorkloadFactory] | None = None) -> Workload:
    """Resolve a registry name, or a plug-in 'package.module:factory', to exactly one workload."""
    factories = builtin_workloads() if registry is None else registry
    if ":" in name:
        return _load_plugin(name)
    if name in factories:
        return factories[name]()
    matches = [key for key in factories if key.startswith(name)] if name else []
    if len(matches) == 1:
        return factories[matches[0]]()
    known = ", ".join(sorted(factories))
    if matches:
        raise UnknownWorkloadError(f"workload {name!r} is ambiguous: {', '.join(matches)}")
    raise UnknownWorkloadError(
        f"unknown workload {name!r}; built in: {known}; or name a plug-in as "
        "'package.module:factory' returning a kernels.workload.Workload"
    )


def _load_plugin(spec: str) -> Workload:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownWorkloadError(f"cannot import workload module {module_name!r}: {exc}") from exc
    factory = getattr(module, attr, None)
    if factory is None:
        raise UnknownWorkloadError(f"module {module_name!r} has no attribute {attr!r}")
    workload = factory() if callable(factory) else factory
    if not isinstance(workload, Workload):
        raise UnknownWorkloadError(
            f"{spec} returned {type(workload).__name__}, expected kernels.workload.Workload"
        )
    return workload
