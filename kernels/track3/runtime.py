"""The torch side of the track3 workload, as the judge calls it."""

from __future__ import annotations

from typing import Any

import torch

from kernels.track3.inputs import generate_inputs as _generate
from kernels.track3.oracle import BlockedOracle
from kernels.track3.reference import build_reference_model
from kernels.workload import TrialSpec, declared_reads

WEIGHT_SEED = 1234


def prepare_process(device: str) -> None:
    """The reference's precision policy: TF32 allowed for float32 matmuls."""
    torch.set_float32_matmul_precision("high")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


def build_reference(config: Any, device: str) -> torch.nn.Module:
    """The organizer reference with seed-1234 weights."""
    return build_reference_model(config, device=device, seed=WEIGHT_SEED)


def build_candidate(entry: type, reference: Any, config: Any, device: str) -> Any:
    """Construct the candidate and give it the reference weights by strict state_dict copy."""
    model = entry(config).to(device=device)
    model.load_state_dict(reference.state_dict(), strict=True)
    return model.eval()


def generate_inputs(config: Any, trial: TrialSpec, device: str) -> tuple[torch.Tensor, ...]:
    """(x, valid_token_mask) for one trial."""
    return _generate(config, trial.seed, trial.padding_ratio, trial.input_scale, device)


def build_oracle(reference: Any, config: Any, device: str) -> Any:
    """Blocked float64 evaluation of the reference arithmetic (bounded memory)."""
    return BlockedOracle(reference)


def cost(config: Any) -> tuple[float, float]:
    """Lower bounds of one forward: causal attention halves QK^T and PV; weights at 2 bytes."""
    b, s, d, f = config.batch_size, config.seq_len, config.d_model, config.ffn_dim
    tokens = b * s
    per_layer = 2 * tokens * (4 * d * d + 2 * d * f) + 2 * b * s * s * d
    weights = config.num_layers * (4 * d * d + 2 * d * f) * 2
    return float(config.num_layers * per_layer), float(2 * tokens * d * 4 + weights)


def call(model: Any, inputs: tuple[Any, ...]) -> Any:
    """What the user calls: forward(x, valid_token_mask) without autograd."""
    x, mask = inputs
    with torch.no_grad():
        return model(x, valid_token_mask=mask)


def settings_read(model: Any) -> list[str] | None:
    """The tunables the candidate's code read, by its own recorder (None: it keeps none)."""
    return declared_reads(model)
