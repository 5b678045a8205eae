"""A workload plug-in whose reference fails: the judge's own step, for fault-injection tests.

It is the softmax workload with one change: its reference raises MemoryError as a judge's
reference pass on a full card would (run 18). Named in a request as
'tests.harness.judge_fault_workload:reference_fault_workload'; it is its own runtime module."""

from __future__ import annotations

from typing import Any

import torch

from kernels.softmax.runtime import (  # noqa: F401 (re-exported: this module is the runtime)
    build_candidate,
    build_oracle,
    call,
    cost,
    generate_inputs,
    prepare_process,
    settings_read,
)
from kernels.softmax.workload import softmax_workload
from kernels.workload import Workload

FAULT = "simulated: the judge's reference ran out of device memory"


class ExhaustedReference(torch.nn.Module):
    """A reference whose every call fails as an out-of-memory reference pass does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise MemoryError(FAULT)


def build_reference(config: Any, device: str) -> torch.nn.Module:
    """The failing reference."""
    return ExhaustedReference()


def reference_fault_workload() -> Workload:
    """Softmax with a reference that always fails."""
    return softmax_workload().model_copy(
        update={"name": "softmax-reference-fault", "runtime_module": __name__}
    )
