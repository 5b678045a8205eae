"""The seed's CUDA-graph replay: an input served by a graph once is replayed straight away."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import pytest
import torch

from kernels.track3 import CONFIGS, generate_inputs
from kernels.track3.reference import build_reference_model


class DoublingGraph:
    """Stands in for a captured CUDA graph on the CPU: replay writes 2 * x into out."""

    def __init__(self, x: torch.Tensor, out: torch.Tensor) -> None:
        self.x, self.out, self.replays = x, out, 0

    def replay(self) -> None:
        self.replays += 1
        self.out.copy_(self.x * 2)


def served_model(seed: ModuleType) -> tuple[Any, Any, DoublingGraph, torch.Tensor, torch.Tensor]:
    """The seed on cpu-2 with one input key already served by a (stand-in) graph."""
    config = CONFIGS["cpu-2"]
    model = seed.OptimizedTransformer(config, {"graph_capture": "cuda_graph"})
    model.load_state_dict(build_reference_model(config, "cpu", seed=1234).state_dict())
    capture = sys.modules[f"{seed.__name__.rsplit('.', 1)[0]}.capture"]
    x, mask = generate_inputs(config, 1, 0.0, 1.0, "cpu")
    graph = DoublingGraph(x.clone(), torch.empty_like(x))
    captured = capture._Captured(graph, graph.x, mask.clone(), graph.out)
    model._graphs._served[capture.input_key(x, mask)] = captured
    return model, capture, graph, x, mask


def test_a_served_input_is_replayed_without_the_long_way(track3_seed: ModuleType) -> None:
    model, _, graph, x, mask = served_model(track3_seed)
    fresh = torch.randn_like(x)
    with torch.no_grad():
        out = model(fresh, valid_token_mask=mask)
    assert graph.replays == 1
    assert torch.equal(out, fresh * 2)  # the fresh input was copied in before the replay
    assert out.data_ptr() != graph.out.data_ptr()  # never the graph's own buffer


def test_other_inputs_and_autograd_take_the_long_way(track3_seed: ModuleType) -> None:
    model, _, graph, x, mask = served_model(track3_seed)
    eager = model._eager(x, mask)
    with torch.no_grad():
        unmasked = model(x)  # another key: no mask passed
        shorter = model(x[:, :64].contiguous(), valid_token_mask=mask[:, :64].contiguous())
    assert graph.replays == 0 and shorter.shape == (1, 64, 128)
    assert torch.equal(unmasked, model._eager(x, None))
    with_grad = model(x, valid_token_mask=mask)  # autograd on: graphs never serve it
    assert graph.replays == 0 and torch.equal(with_grad.detach(), eager.detach())


def test_new_weights_forget_the_served_graphs(track3_seed: ModuleType) -> None:
    model, _, graph, x, mask = served_model(track3_seed)
    model.load_state_dict(model.state_dict())
    with torch.no_grad():
        model(x, valid_token_mask=mask)
    assert graph.replays == 0


@pytest.mark.gpu
def test_graph_replay_equals_the_eager_forward_on_cuda(track3_seed: ModuleType) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    config = CONFIGS["2"]
    reference = build_reference_model(config, "cuda", seed=1234)
    tunables = {"graph_capture": "cuda_graph", "fused_kernel": "triton"}
    model = track3_seed.OptimizedTransformer(config, tunables).cuda().eval()
    model.load_state_dict(reference.state_dict())
    with torch.no_grad():
        for seed in range(4):  # capture, then replays of the served graph, fresh inputs each
            for padding in (0.0, 0.5):
                x, mask = generate_inputs(config, seed, padding, 1.0, "cuda")
                torch.testing.assert_close(model(x, mask), model._eager(x, mask))
