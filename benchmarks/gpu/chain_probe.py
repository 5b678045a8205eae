"""Does a fused layer's chain of weight GEMMs wait on its weight loads, and can Triton hide them?

A probe, not a kernel of the product: STEPS dependent [rows x D] @ [D x D] fp16 GEMMs per
program (the shape of the fused layer's Q, out_proj, FFN and K/V products), each weight tile
loaded from memory, with a GELU between them as the layer has. Ways to load: 'in order' (each
weight just before its GEMM, as fused_kernels does), 'one ahead' (the next weight issued before
the current GEMM), 'pipelined' (a tl.range loop over the weights whose loads Triton's software
pipeliner issues num_stages ahead), and the first and third through a tensor descriptor (TMA:
the copy engine writes the tile to shared memory, no registers between). Timed as a CUDA graph
of REPLAYS back-to-back launches (so launch overhead is out), per launch. Grids of 8 and 256
programs stand for batch 1 and batch 64 at 128 tokens.
Usage: python benchmarks/gpu/chain_probe.py OUT.md
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

STEPS = 9
REPLAYS = 50
# (MODE, num_stages): in order, one ahead, pipelined 2 and 3, then the same through TMA.
MODES = ((0, 1), (1, 1), (2, 2), (2, 3), (3, 1), (4, 2), (4, 3))


@triton.jit
def _gelu(t):
    return 0.5 * t * (1.0 + tl.math.erf(t * 0.7071067811865476))


@triton.jit
def chain_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    D: tl.constexpr,
    BM: tl.constexpr,
    STEPS: tl.constexpr,
    MODE: tl.constexpr,
    STAGES: tl.constexpr,
):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, D)
    ks = tl.arange(0, D)
    at = rows[:, None] * D + cols[None, :]
    h = tl.load(x_ptr + at)
    tile = cols[None, :] * D + ks[:, None]  # W [N, K] row-major, read as W^T [K, N]
    if MODE == 0:
        for i in tl.static_range(STEPS):
            w = tl.load(w_ptr + i * D * D + tile)
            h = _gelu(tl.dot(h.to(tl.float16), w))
    elif MODE == 1:
        w = tl.load(w_ptr + tile)
        for i in tl.static_range(STEPS):
            nxt = tl.load(w_ptr + ((i + 1) % STEPS) * D * D + tile)
            h = _gelu(tl.dot(h.to(tl.float16), w))
            w = nxt
    elif MODE == 2:
        for i in tl.range(0, STEPS, num_stages=STAGES):
            w = tl.load(w_ptr + i * D * D + tile)
            h = _gelu(tl.dot(h.to(tl.float16), w))
    else:  # the weights through a tensor descriptor (TMA on Hopper), in order or pipelined
        desc = tl.make_tensor_descriptor(w_ptr, [STEPS * D, D], [D, 1], [D, D])
        if MODE == 3:
            for i in tl.static_range(STEPS):
                h = _gelu(tl.dot(h.to(tl.float16), desc.load([i * D, 0]).T))
        else:
            for i in tl.range(0, STEPS, num_stages=STAGES):
                h = _gelu(tl.dot(h.to(tl.float16), desc.load([i * D, 0]).T))
    tl.store(out_ptr + at, h)


def time_launch(launch: object) -> float:
    """Microseconds per launch: a graph of REPLAYS launches, replayed and event-timed."""
    for _ in range(3):
        launch()  # type: ignore[operator]
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPLAYS):
            launch()  # type: ignore[operator]
    samples = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / REPLAYS)
    return sorted(samples)[len(samples) // 2]


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: chain_probe.py OUT.md")
    if not torch.cuda.is_available():
        raise SystemExit("the chain probe needs a CUDA device (none is visible)")
    out = Path(sys.argv[1])
    # Descriptors made on the device need global scratch memory from an allocator.
    triton.set_allocator(
        lambda size, _align, _stream: torch.empty(size, dtype=torch.int8, device="cuda")
    )
    width = 128
    weights = torch.randn(STEPS, width, width, device="cuda").mul_(width**-0.5).half()
    lines = [
        f"{STEPS} dependent GEMMs [rows x {width}] @ [{width} x {width}] fp16 per program, GELU "
        f"between; microseconds per launch (graph of {REPLAYS} launches, median of 10).",
        "",
        "| programs | rows | warps | in order | one ahead | pipelined 2 | pipelined 3 "
        "| TMA in order | TMA pipelined 2 | TMA pipelined 3 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for programs, rows in ((8, 16), (8, 32), (256, 32), (128, 64)):
        for warps in (4, 8):
            x = torch.randn(programs * rows, width, device="cuda")
            y = torch.empty_like(x)
            cells = []
            for mode, stages in MODES:
                launch = functools.partial(
                    chain_kernel[(programs,)],
                    x,
                    weights,
                    y,
                    width,
                    rows,
                    STEPS,
                    mode,
                    stages,
                    num_warps=warps,
                )
                try:
                    cells.append(f"{time_launch(launch):.2f}")
                except Exception as exc:  # a variant that does not build is a finding
                    cells.append(f"error {type(exc).__name__}")
            lines.append(f"| {programs} | {rows} | {warps} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
            out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
