"""Shared helpers of the candidate: padded-row masking, caches, fp32-result low-precision GEMMs."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

LOW_PRECISION = {"fp16": torch.float16, "bf16": torch.bfloat16}
# How a device runs a GEMM of low-precision operands with an fp32 result: torch's out_dtype
# addmm/bmm (cuBLAS), or the operands' values multiplied in fp32 (the same products: fp16 and
# bf16 values are exact in fp32 and in TF32).
NATIVE, EMULATED = "out_dtype", "emulated"


class Fp32Results:
    """Which form of fp32-result GEMM each device and operand dtype runs, found once by trying
    torch's out_dtype matmuls there (absent before torch 2.7 and on the CPU)."""

    def __init__(self) -> None:
        self._forms: dict[tuple[str, torch.dtype], str] = {}

    def form(self, device: torch.device, dtype: torch.dtype) -> str:
        key = (str(device), dtype)
        if key in self._forms:
            return self._forms[key]
        if device.type != "cuda":
            return EMULATED
        if torch.compiler.is_compiling() or torch.cuda.is_current_stream_capturing():
            return EMULATED  # no trial inside a trace or a capture: decided on a plain call
        try:
            a = torch.ones(16, 16, device=device, dtype=dtype)
            torch.addmm(torch.zeros(16, device=device), a, a, out_dtype=torch.float32)
            torch.bmm(a[None], a[None], out_dtype=torch.float32)
            self._forms[key] = NATIVE
        except (RuntimeError, TypeError, NotImplementedError):
            self._forms[key] = EMULATED
        return self._forms[key]


def linear_fp32(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forms: Fp32Results
) -> torch.Tensor:
    """x @ weight.T + bias in fp32 from low-precision x and weight: products of their values,
    fp32 accumulation, an fp32 bias and result (nothing rounded back to low precision)."""
    if forms.form(x.device, x.dtype) == NATIVE:
        flat = x.reshape(-1, x.shape[-1])
        out = torch.addmm(bias.float(), flat, weight.t(), out_dtype=torch.float32)
        return out.view(*x.shape[:-1], weight.shape[0])
    return F.linear(x.float(), weight.float(), bias.float())


def matmul_fp32(a: torch.Tensor, b: torch.Tensor, forms: Fp32Results) -> torch.Tensor:
    """a @ b over the leading (batch) dimensions in fp32 from low-precision operands."""
    if forms.form(a.device, a.dtype) == NATIVE:
        lead = a.shape[:-2]
        flat_a = a.reshape(-1, *a.shape[-2:])
        flat_b = b.reshape(-1, *b.shape[-2:])
        out = torch.bmm(flat_a, flat_b, out_dtype=torch.float32)
        return out.view(*lead, a.shape[-2], b.shape[-1])
    return a.float() @ b.float()


def zero_padded(x: torch.Tensor, mask: torch.Tensor | None, mode: str) -> torch.Tensor:
    """Zero the rows of padded positions (the reference's masked_fill, or an equivalent)."""
    if mask is None:
        return x
    if mode == "multiply":
        return x * mask[..., None].to(x.dtype)
    capturing = x.is_cuda and torch.cuda.is_current_stream_capturing()
    if mode == "skip_if_full" and not capturing and bool(mask.all()):
        return x
    return x.masked_fill(~mask[..., None], 0)


class DerivedCache:
    """Derived tensors (packed or low-precision weights, masks) rebuilt when weights change."""

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.value: Any = None

    def get(self, key: tuple[object, ...], build: object) -> Any:
        if key != self.key:
            self.value = build()  # type: ignore[operator]
            self.key = key
        return self.value


def weight_key(*tensors: torch.Tensor) -> tuple[object, ...]:
    """Identity and version of each tensor: derived tensors are rebuilt when any changes.
    Inference tensors (made under torch.inference_mode()) keep no version counter; theirs is
    -1, so an in-place update of one in inference mode is not seen (load_state_dict and .to()
    clear the caches whatever the mode)."""
    return tuple(
        (t.data_ptr(), -1 if t.is_inference() else t._version, t.dtype, str(t.device))
        for t in tensors
    )


class SettingsRead:
    """The candidate's tunables, remembering which ones its code has read.

    A dict in every way the code uses one (``[]``, ``get``, ``in``, ``items``, ``values``,
    ``update``, ``clear``), plus ``names_read()``: the tunables this model has read since it
    was built, its construction included. The judge reports them per configuration, and the
    search screens a change where the parent read what it changed: a tunable a configuration's
    code never read cannot change what runs there (the torch path's precision on sizes the
    fused kernels serve). A model that ran a torch.compile trace reports ``None`` (unknown)
    from then on: a cached trace reads nothing when it runs again, so what its reads were
    cannot be vouched for."""

    def __init__(self, values: dict[str, str]) -> None:
        self._values = dict(values)
        self._read: set[str] = set()
        self._unknown = False

    def __getitem__(self, name: str) -> str:
        # Read on every forward that is not a graph replay: kept to a set insertion (a few
        # tens of ns). Under a torch.compile trace Dynamo replays the insertion after the
        # trace, with no graph break.
        self._read.add(name)
        return self._values[name]

    def get(self, name: str, default: Any = None) -> Any:
        self._read.add(name)
        return self._values.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._values  # every variant declares every tunable: no value read

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> Any:
        return self._values.keys()

    def items(self) -> list[tuple[str, str]]:
        self._read.update(self._values)
        return list(self._values.items())

    def values(self) -> list[str]:
        self._read.update(self._values)
        return list(self._values.values())

    def __setitem__(self, name: str, value: str) -> None:
        self._values[name] = value

    def update(self, values: Any) -> None:
        self._values.update(values)

    def clear(self) -> None:
        self._values.clear()

    def __eq__(self, other: object) -> bool:
        self._read.update(self._values)
        return self._values == (other._values if isinstance(other, SettingsRead) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SettingsRead({self._values!r})"

    def mark_unknown(self) -> None:
        """What runs from here on reads tunables out of sight (a compiled trace)."""
        self._unknown = True

    def names_read(self) -> list[str] | None:
        """The tunables read so far, sorted (None: some reads could not be seen)."""
        return None if self._unknown else sorted(self._read)
