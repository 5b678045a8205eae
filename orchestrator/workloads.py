"""Resolving `--workload`: a built-in name or a plug-in 'module:factory', every failure a
message that names the workload, what went wrong and the fix (never a traceback)."""

from __future__ import annotations

from pydantic import ValidationError

from kernels.registry import UnknownWorkloadError, builtin_workloads, resolve_workload
from kernels.workload import Workload


class WorkloadLoadError(ValueError):
    """A workload that cannot be resolved, imported or built."""


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
        + ("" if err["type"] == "missing" else f" (got {str(err.get('input'))[:80]!r})")
        for err in exc.errors()[:5]
    )


def load_workload(spec: str) -> Workload:
    """The workload named by `spec`; WorkloadLoadError says what failed and how to fix it."""
    builtins = ", ".join(sorted(builtin_workloads()))
    try:
        return resolve_workload(spec)
    except UnknownWorkloadError as exc:
        raise WorkloadLoadError(f"{exc}; nothing was written") from None
    except ValidationError as exc:
        raise WorkloadLoadError(
            f"workload {spec!r} builds an invalid {exc.title}: {_problems(exc)}; fix the "
            "factory's values (kernels.workload.Workload documents every field); nothing "
            "was written"
        ) from None
    except Exception as exc:  # plug-in code may fail in any way at all
        raise WorkloadLoadError(
            f"workload {spec!r} failed while its module was imported or its factory called: "
            f"{type(exc).__name__}: {str(exc)[:300]}; fix the plug-in (run "
            f"'python -c \"import {spec.partition(':')[0]}\"' to see where), or use a built-in "
            f"workload ({builtins}); nothing was written"
        ) from None
