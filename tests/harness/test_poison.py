"""The CUDA poison fill sizes itself to the card's free memory instead of running it out."""

from __future__ import annotations

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
