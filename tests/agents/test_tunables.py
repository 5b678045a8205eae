"""Reading and rewriting the TUNABLES block of real candidate sources."""

from __future__ import annotations

import ast

import pytest

from agents.tunables import (
    BLOCK_END,
    BLOCK_START,
    TunablesError,
    read_docs,
    read_requirements,
    read_space,
    read_tunables,
    write_tunables,
)
from kernels.candidate_tree import load_candidate
from kernels.softmax.workload import softmax_workload
from kernels.track3.workload import track3_workload
from kernels.workload import Workload


@pytest.mark.parametrize("workload", [track3_workload(), softmax_workload()], ids=lambda w: w.name)
def test_reading_matches_the_imported_module(workload: Workload) -> None:
    source = workload.seed_sources()[workload.candidate_file]
    module = load_candidate(workload.seed_entry(), f"t_{workload.name}")
    assert read_tunables(source) == module.TUNABLES
    assert read_space(source) == {k: v["values"] for k, v in module.TUNABLE_SPACE.items()}
    assert read_docs(source) == {k: v["doc"] for k, v in module.TUNABLE_SPACE.items()}
    assert all(read_docs(source).values())


def test_track3_values(track3_source: str) -> None:
    assert read_tunables(track3_source)["attention"] == "explicit"
    assert read_space(track3_source)["matmul_precision"] == ["fp32", "fp16", "bf16"]
    assert "erf" in read_docs(track3_source)["gelu"]


def test_softmax_values(softmax_source: str) -> None:
    assert read_tunables(softmax_source) == {
        "exp_passes": "twice",
        "normalize": "divide",
        "row_chunking": "none",
    }
    assert read_space(softmax_source)["normalize"] == [
        "divide",
        "reciprocal_multiply",
        "fused_softmax",
    ]


def _split(source: str) -> tuple[str, str]:
    """Text up to and including the block's header line, and text from the end marker on."""
    start = source.index(BLOCK_START)
    header_end = source.index("\n", start) + 1
    return source[:header_end], source[source.index(BLOCK_END) :]


def test_write_round_trips_and_changes_only_the_block(track3_source: str) -> None:
    space = read_space(track3_source)
    new = {name: values[-1] for name, values in space.items()}
    assert new != read_tunables(track3_source)
    rewritten = write_tunables(track3_source, new)
    assert read_tunables(rewritten) == new
    assert rewritten != track3_source
    assert _split(rewritten) == _split(track3_source)
    # Everything but the block is untouched: space and docs read the same.
    assert read_space(rewritten) == space
    assert read_docs(rewritten) == read_docs(track3_source)
    ast.parse(rewritten)
    # Rewriting back restores the original bytes (the seed block is in canonical form).
    assert write_tunables(rewritten, read_tunables(track3_source)) == track3_source


def test_write_keeps_the_given_order(softmax_source: str) -> None:
    new = {"row_chunking": "chunks_of_64", "exp_passes": "once", "normalize": "divide"}
    rewritten = write_tunables(softmax_source, new)
    assert list(read_tunables(rewritten)) == list(new)
    assert _split(rewritten) == _split(softmax_source)
    assert write_tunables(softmax_source, read_tunables(softmax_source)) == softmax_source


def test_a_source_without_the_block_cannot_be_rewritten(softmax_source: str) -> None:
    without = softmax_source.replace(BLOCK_START, "# tunables").replace(BLOCK_END, "# end")
    assert read_tunables(without) == read_tunables(softmax_source)  # still readable
    with pytest.raises(TunablesError, match="no tunables block"):
        write_tunables(without, {"exp_passes": "once"})
    only_end = softmax_source.replace(BLOCK_START, "# tunables")
    with pytest.raises(TunablesError):
        write_tunables(only_end, {"exp_passes": "once"})


def test_missing_or_malformed_tunables_raise() -> None:
    with pytest.raises(TunablesError, match="no literal TUNABLES"):
        read_tunables("X = 1\n")
    with pytest.raises(TunablesError, match="no literal TUNABLE_SPACE"):
        read_space("TUNABLES = {}\n")
    with pytest.raises(TunablesError, match="dict of str"):
        read_tunables("TUNABLES = {'a': 1}\n")
    with pytest.raises(TunablesError, match="dict of str"):
        read_tunables("TUNABLES = ['a']\n")
    with pytest.raises(TunablesError, match="must be a dict"):
        read_space("TUNABLE_SPACE = 3\n")
    assert read_tunables("TUNABLES = {'a': 'b'}\n") == {"a": "b"}


@pytest.mark.parametrize("value", ["it's", 'say "hi"', "back\\slash"])
def test_write_tunables_round_trips_values_with_quotes(value: str) -> None:
    source = softmax_workload().seed_candidate.read_text()
    rewritten = write_tunables(source, {"exp_passes": value})
    assert read_tunables(rewritten) == {"exp_passes": value}


def test_requirements_are_read_and_checked(track3_source: str) -> None:
    requirements = read_requirements(track3_source)
    assert requirements["fused_rows"] == {"fused_kernel": "triton"}
    assert requirements["attention"] == {}
    broken = track3_source.replace(
        '"requires": {"fused_kernel": "triton"}', '"requires": {"fused_kernel": "cuda"}', 1
    )
    with pytest.raises(TunablesError, match=r"requires fused_kernel='cuda'.*declared"):
        read_requirements(broken)
    unknown = track3_source.replace(
        '"requires": {"fused_kernel": "triton"}', '"requires": {"no_such": "x"}', 1
    )
    with pytest.raises(TunablesError, match="no such tunable"):
        read_requirements(unknown)
