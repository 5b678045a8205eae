"""Dynamo's compiled frames are forgotten between configs: no config is judged eager because
earlier configs used up the recompile limit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch._dynamo

from harness.compile_state import forget_compiled_frames
from harness.models import Outcome
from harness.runner import RunnerSettings, run_evaluation
from tests.harness.conftest import softmax_request

# Right only when Dynamo traced the frame (is_compiling() is then a constant True): a frame
# run eagerly past the recompile limit multiplies by 1.01. Each build compiles the frame for
# three shapes of its config's width, so two configs without a reset exceed the limit of 8.
LIMIT_PROBE = """
import torch
from torch import nn


def _probe(x):
    return torch.softmax(x, dim=-1) * (1.0 if torch.compiler.is_compiling() else 1.01)


class OptimizedSoftmax(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fn = torch.compile(_probe, backend="eager", dynamic=False)
        for rows in (1, 2, 3):
            self.fn(torch.zeros(rows, config.cols))

    def forward(self, x):
        return self.fn(x)
"""


def _frames_compiled() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def test_a_forgotten_frame_compiles_again_past_the_recompile_limit() -> None:
    fn = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=1):
        fn(torch.ones(2))
        before = _frames_compiled()
        fn(torch.ones(3))  # over the limit of 1: run eagerly, nothing compiled
        assert _frames_compiled() == before
        forget_compiled_frames()
        fn(torch.ones(3))
        assert _frames_compiled() == before + 1


@pytest.mark.slow
def test_the_judge_compiles_each_config_afresh(
    write_candidate: Callable[..., Path], tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("limit_probe", LIMIT_PROBE, whole=True)
    result = run_evaluation(softmax_request(module), tmp_path / "judge", runner_settings)
    assert result.outcome is Outcome.PASSED, result.message
