"""Poisoned memory: make unwritten output elements recognisable instead of silently zero.

On the CPU, glibc's malloc perturbation fills every fresh allocation with 0xFE bytes (and the
mmap threshold is raised so large tensors come from the heap too); on CUDA, blocks of the
output's size are filled with the same pattern and returned to the caching allocator just
before the candidate runs. Both are switched off while timing, so they cost nothing there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Iterator
from contextlib import contextmanager

import torch

POISON_BYTE = 0xFE
POISON_INT32 = -16843010  # 0xFEFEFEFE: float32 -1.69e38, a value no honest kernel writes
POISON_BLOCKS = 6
# Left free beside the poison blocks: the candidate's own workspace comes on top of them.
POISON_HEADROOM_BYTES = 1 << 30
_M_MMAP_THRESHOLD = -3
_M_PERTURB = -6
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        _ = libc.mallopt
    except (OSError, AttributeError):
        return None  # not glibc: CPU outputs are not poisoned (recorded as such)
    return libc


def cpu_poisoning_available() -> bool:
    """Whether this C library lets the judge perturb fresh allocations."""
    return _libc() is not None


@contextmanager
def poisoned_allocations(device: str, nbytes: int) -> Iterator[None]:
    """Within the block, fresh allocations (the candidate's output) start poisoned."""
    libc = _libc() if device == "cpu" else None
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
        libc.mallopt(_M_PERTURB, (~POISON_BYTE) & 0xFF)  # glibc fills with the complement
    elif device.startswith("cuda"):
        _poison_cuda_cache(nbytes, device)
    try:
        yield
    finally:
        if libc is not None:
            libc.mallopt(_M_PERTURB, 0)


# Elements counted at a time: the count's temporaries stay under 100 MB on any output.
COUNT_CHUNK_ELEMENTS = 1 << 26


def poison_block_count(nbytes: int, free_bytes: int) -> int:
    """How many output-sized poison blocks the card can spare, at most POISON_BLOCKS.

    Six blocks of a 13.1 GB output (config 14) do not fit an 80 GB card beside the inputs and
    the expected output; the judge's own fill then ran out of memory and was scored as the
    candidate raising (run 18, H100). Fewer blocks poison less, never fail the candidate."""
    spare = free_bytes - POISON_HEADROOM_BYTES
    return max(0, min(POISON_BLOCKS, spare // max(1, nbytes)))


def _poison_cuda_cache(nbytes: int, device: str) -> None:
    words = max(1, (nbytes + 3) // 4)
    free_bytes, _ = torch.cuda.mem_get_info(device)
    count = poison_block_count(words * 4, free_bytes)
    blocks = [torch.empty(words, dtype=torch.int32, device=device) for _ in range(count)]
    for block in blocks:
        block.fill_(POISON_INT32)
    torch.cuda.synchronize()
    del blocks


def count_poisoned(out: torch.Tensor, chunk_elements: int = COUNT_CHUNK_ELEMENTS) -> int:
    """Elements of a float32 output that still hold the poison bit pattern, counted a chunk
    at a time: a whole-output `(out == poison).sum()` of config 14's 3.28e9 elements asked
    for 24.4 GiB (its int64 sum) on an 80 GB H100 that held the output, the expected output
    and the inputs, and ran out of memory in the judge (2026-12-07)."""
    if out.dtype != torch.float32 or not out.is_contiguous():
        return 0
    words = out.detach().reshape(-1).view(torch.int32)
    return sum(
        int(torch.count_nonzero(words[start : start + chunk_elements] == POISON_INT32))
        for start in range(0, words.numel(), chunk_elements)
    )
