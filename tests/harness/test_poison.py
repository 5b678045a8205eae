"""The poison fill sizes itself to the card's free memory, and its count to bounded chunks."""

from __future__ import annotations

import torch

from harness.poison import POISON_BLOCKS, POISON_HEADROOM_BYTES, poison_block_count

GB = 10**9


def test_small_outputs_get_every_poison_block() -> None:
    assert poison_block_count(64 * 2**20, 70 * GB) == POISON_BLOCKS


def test_a_huge_output_gets_only_the_blocks_that_fit() -> None:
    # Config 14's 13.1 GB output with ~40 GB free on an 80 GB card: six blocks would need 79 GB.
    count = poison_block_count(13_107_200_000, 40 * GB)
    assert count == 2
    assert count * 13_107_200_000 + POISON_HEADROOM_BYTES <= 40 * GB


def test_no_block_when_not_even_one_fits() -> None:
    assert poison_block_count(13_107_200_000, 10 * GB) == 0
    assert poison_block_count(GB, POISON_HEADROOM_BYTES // 2) == 0


def test_the_poison_count_by_chunks_is_the_whole_outputs_count() -> None:
    from harness.poison import POISON_INT32, count_poisoned

    out = torch.randn(7, 13, 11)
    words = out.view(-1).view(torch.int32)
    marked = [0, 63, 64, 500, words.numel() - 1]  # chunk edges and the partial last chunk
    words[marked] = POISON_INT32
    whole = int((out.view(torch.int32) == POISON_INT32).sum())
    assert whole == len(marked)
    assert count_poisoned(out, chunk_elements=64) == whole == count_poisoned(out)
    assert count_poisoned(out.transpose(0, 2)) == 0  # not contiguous: not counted
