"""The seed candidate's fused Triton kernels, run by Triton's interpreter on the CPU in a fresh
process (the interpreter is chosen when the kernels are defined), judged by the real gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from kernels.candidate_tree import load_candidate, write_tree
from kernels.track3.workload import track3_workload

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys, torch
from harness.gate import count_failures
from kernels.candidate_tree import load_candidate
from kernels.track3 import CONFIGS, generate_inputs
from kernels.track3.reference import build_reference_model
from kernels.track3.workload import track3_workload

seed = load_candidate(track3_workload().seed_entry(), "fused_seed")
fused = sys.modules["fused_seed.fused"]
tol = track3_workload().tolerance
rows = []
split_blocks = []
run_split = fused.split_layer
def counted_split(meta, args):  # which launches fused_boundary=separate made, with what blocks
    split_blocks.append(meta["blocks"])
    run_split(meta, args)
fused.split_layer = counted_split
for config_id, precision, padding, block_rows, *changes in json.loads(sys.argv[1]):
    config = CONFIGS[config_id].model_copy(update=changes[0] if changes else {})
    reference = build_reference_model(config, device="cpu", seed=1234)
    tunables = {"fused_kernel": "triton", "matmul_precision": precision, "fused_rows": block_rows}
    tunables.update(changes[1] if len(changes) > 1 else {})
    model = seed.OptimizedTransformer(config, tunables)
    model.load_state_dict(reference.state_dict(), strict=True)
    x, mask = generate_inputs(config, 1234, padding, 1.0, "cpu")
    mask = mask if padding else None
    with torch.no_grad():
        want = reference(x, valid_token_mask=mask)
        got = fused.fused_forward(model, model._packs(), x, mask)
    failed, max_abs = count_failures(got, want, tol)
    row = {"failed": failed, "max_abs": max_abs, "fits": fused.fused_fits(model, x),
           "padded_rows_zero": bool((got[~mask] == 0).all()) if mask is not None else None}
    if tunables.get("fused_boundary") == "separate":  # and the same inputs through one kernel
        row["split_blocks"], split_blocks[:] = list(split_blocks), []
        row["layers"] = len(model.layers)
        model.tunables["fused_boundary"] = "layer"
        with torch.no_grad():
            whole = fused.fused_forward(model, model._packs(), x, mask)
        row["max_abs_vs_layer"] = float((got - whole).abs().max())
    rows.append(row)
print(json.dumps(rows))
"""


Case = (
    tuple[str, str, float, str]
    | tuple[str, str, float, str, dict[str, int]]
    | tuple[str, str, float, str, dict[str, int], dict[str, str]]
)
IEEE_EVERYWHERE = {
    "fused_projection_operands": "fp32_ieee",
    "fused_attention_operands": "fp32_ieee",
    "fused_ffn_operands": "fp32_ieee",
}


def run_interpreted(cases: list[Case], script: str = SCRIPT) -> list[dict[str, object]]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script, json.dumps(cases)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_fused_kernels_pass_the_gate_on_cpu_shapes() -> None:
    # heads 4 and 16 (head dim 32 and 8, padded to 16), D 128 and 64, one and several row
    # blocks per sequence, with and without right padding, torch-path precision fp32 or fp16
    # (the fused kernels' operands are fp16 either way); and shapes that are no powers of two
    # (3 heads padded to 4, width 96, FFN 80, 40 tokens).
    odd = {"batch_size": 2, "seq_len": 40, "d_model": 96, "num_heads": 3, "ffn_dim": 80}
    narrowest = {"d_model": 64, "ffn_dim": 64}
    cases: list[Case] = [
        ("cpu-5", "fp16", 0.5, "auto", {**odd, "num_layers": 2}),
        ("cpu-2", "fp16", 0.5, "32"),
        ("cpu-3", "fp16", 0.0, "auto"),
        ("cpu-5", "fp32", 0.5, "16", narrowest),
        ("cpu-5", "fp16", 0.25, "auto", narrowest),
    ]
    rows = run_interpreted(cases)
    for case, row in zip(cases, rows, strict=True):
        assert row["fits"], case
        assert row["failed"] == 0, (case, row)
        assert row["padded_rows_zero"] in (None, True), case


def broken_seed_script(tmp_path: Path, old: str, new: str, path: str = "fused_kernels.py") -> str:
    """SCRIPT over a copy of the seed whose `path` has `old` replaced by `new`."""
    sources = track3_workload().seed_sources()
    kernels = sources[path]
    sources[path] = kernels.replace(old, new)
    assert sources[path] != kernels, old
    write_tree(sources, tmp_path)
    module = tmp_path / "candidate.py"
    script = SCRIPT.replace("track3_workload().seed_entry()", f"Path({str(module)!r})", 1)
    return script.replace(
        "import json, sys, torch", "import json, sys, torch\nfrom pathlib import Path"
    )


def test_a_broken_fused_kernel_fails_the_gate(tmp_path: Path) -> None:
    # Can the check fail? The same kernels with a wrong GELU constant must not pass.
    script = broken_seed_script(
        tmp_path, "tl.math.erf(t * 0.7071067811865476)", "tl.math.erf(t * 0.75)"
    )
    rows = run_interpreted([("cpu-5", "fp32", 0.0, "16", {"d_model": 64, "ffn_dim": 64})], script)
    assert rows[0]["fits"] and rows[0]["failed"] > 0  # type: ignore[operator]


def test_schedule_tunables_and_ieee_operands_pass_the_gate() -> None:
    # Width 32 (where the H200 measured fp16 operands failing) served with exact fp32 operands,
    # each GEMM group on its own, and the block sizes and stages the search may choose.
    schedule = {"fused_keys": "16", "fused_ffn_block": "32", "fused_stages": "2"}
    cases: list[Case] = [
        ("cpu-5", "fp32", 0.5, "auto", {}, IEEE_EVERYWHERE),
        ("cpu-4", "fp32", 0.0, "32", {}, {"fused_attention_operands": "fp32_ieee"}),
        ("cpu-2", "fp32", 0.25, "auto", {}, {"fused_projection_operands": "fp32_ieee"}),
        ("cpu-3", "fp32", 0.0, "auto", {}, {**schedule, "fused_ffn_operands": "fp32_ieee"}),
        ("cpu-1", "fp32", 0.5, "64", {}, {**schedule, "fused_keys": "128"}),
    ]
    rows = run_interpreted(cases)
    for case, row in zip(cases, rows, strict=True):
        assert row["fits"], case
        assert row["failed"] == 0, (case, row)


def script_comparing(tunable: str, value: str, key: str) -> str:
    """SCRIPT that runs each case whose `tunable` is not `value` again with it, on the same
    inputs, and records the largest difference between the two outputs as row[key]."""
    return SCRIPT.replace(
        "    rows.append(row)",
        f"""    if tunables.get({tunable!r}, {value!r}) != {value!r}:
        model.tunables[{tunable!r}] = {value!r}
        with torch.no_grad():
            other = fused.fused_forward(model, model._packs(), x, mask)
        row[{key!r}] = float((got - other).abs().max())
    rows.append(row)""",
    )


PIPELINED_SCRIPT = script_comparing("fused_weight_loads", "in_order", "max_abs_vs_in_order")


def test_pipelined_weight_loads_compute_what_loads_in_order_compute() -> None:
    # The loops over FFN blocks (FFN 80 in five blocks of 16, and in three of 32, the last one
    # partial) and over K and V, pipelined, in one kernel per layer and split in two; in the
    # interpreter the same operations run in the same order, so they agree to the bit.
    odd = {"batch_size": 2, "seq_len": 40, "d_model": 96, "num_heads": 3, "ffn_dim": 80}
    cases: list[Case] = [
        (
            "cpu-5",
            "fp32",
            0.5,
            "auto",
            {**odd, "num_layers": 2},
            {"fused_weight_loads": "pipelined_2", "fused_ffn_block": "16"},
        ),
        ("cpu-3", "fp32", 0.0, "auto", {}, {"fused_weight_loads": "pipelined_3"}),
        (
            "cpu-5",
            "fp32",
            0.0,
            "16",
            {**odd, "num_layers": 2},
            {"fused_weight_loads": "pipelined_3", "fused_ffn_block": "32"},
        ),
        (
            "cpu-2",
            "fp32",
            0.25,
            "auto",
            {},
            {**SPLIT, "fused_weight_loads": "pipelined_2", "fused_ffn_block": "32"},
        ),
    ]
    rows = run_interpreted(cases, PIPELINED_SCRIPT)
    for case, row in zip(cases, rows, strict=True):
        assert row["fits"], case
        assert row["failed"] == 0, (case, row)
        assert row["padded_rows_zero"] in (None, True), case
        assert row["max_abs_vs_in_order"] == 0.0, (case, row)


@pytest.mark.parametrize(
    "broken",
    [
        ("tl.store(at + j * S * DH_PAD", "tl.store(at"),  # the K/V loop writes V over K
        ("tl.range(0, F, BF, num_stages=PIPE)", "tl.range(0, F - BF, BF, num_stages=PIPE)"),
    ],
    ids=["kv-loop", "ffn-loop"],
)
def test_a_broken_pipelined_loop_fails_the_gate(tmp_path: Path, broken: tuple[str, str]) -> None:
    # Can the comparison fail? Each pipelined loop, broken only in its pipelined branch (the
    # K/V loop writing V over K; the FFN loop dropping its last block), must not pass.
    script = broken_seed_script(tmp_path, *broken)
    case: Case = ("cpu-3", "fp32", 0.0, "auto", {}, {"fused_weight_loads": "pipelined_2"})
    rows = run_interpreted([case], script)
    assert rows[0]["fits"] and rows[0]["failed"] > 0  # type: ignore[operator]


FP32_OPERANDS = ("fused_projection_operands", "fused_attention_operands", "fused_ffn_operands")


def test_split_fp32_operands_reach_every_gemm_group() -> None:
    # The interpreter computes a dot in fp32 whatever input_precision says, so three-TF32
    # operands run there as exact fp32 products: far closer to the reference than fp16
    # operands on the same inputs. Wired to fp16 anywhere, a group would round like fp16.
    fp16: Case = ("cpu-2", "fp32", 0.25, "auto")
    chosen = dict.fromkeys(FP32_OPERANDS, "tf32x3")
    cases: list[Case] = [fp16, ("cpu-2", "fp32", 0.25, "auto", {}, chosen)]
    rows = run_interpreted(cases)
    assert all(row["failed"] == 0 and row["fits"] for row in rows), rows
    errors = [cast(float, row["max_abs"]) for row in rows]
    assert errors[1] < errors[0] / 20, errors


def test_fused_min_width_sends_narrower_models_to_the_torch_path() -> None:
    narrow: Case = ("cpu-5", "fp16", 0.0, "auto", {}, {"fused_min_width": "64"})
    default: Case = ("cpu-5", "fp16", 0.0, "auto")
    rows = run_interpreted([narrow, default])
    assert rows[0]["fits"] is False and rows[1]["fits"] is True


def test_packs_follow_the_operand_tunables_whatever_the_torch_path_precision() -> None:
    """The packs are fp16 unless a weight GEMM takes fp32 operands (IEEE or three TF32
    products), while matmul_precision keeps governing the torch path."""
    import torch

    from kernels.track3 import CONFIGS

    seed = load_candidate(track3_workload().seed_entry(), "seed_packs")
    for precision in ("fp32", "fp16", "bf16"):
        tunables = {"fused_kernel": "triton", "matmul_precision": precision}
        model = seed.OptimizedTransformer(CONFIGS["cpu-3"], tunables)
        vecs, mats = model._packs()
        assert (vecs.dtype, mats.dtype) == (torch.float32, torch.float16), precision
        assert model.layers[0].tunables["matmul_precision"] == precision
    for name, packed in (
        ("fused_projection_operands", torch.float32),
        ("fused_ffn_operands", torch.float32),
        ("fused_attention_operands", torch.float16),  # K/V become fp32, the weights do not
    ):
        for value in ("fp32_ieee", "tf32x3"):
            model = seed.OptimizedTransformer(
                CONFIGS["cpu-3"], {"fused_kernel": "triton", name: value}
            )
            assert model._packs()[1].dtype == packed, (name, value)
    fused = sys.modules["seed_packs.fused"]
    chosen = {"fused_attention_operands": "fp32_ieee", "fused_ffn_operands": "tf32x3"}
    modes = fused.operand_modes({**model.tunables, "fused_projection_operands": "fp16", **chosen})
    assert modes == {"PREC_QKV": 0, "PREC_ATT": 1, "PREC_FFN": 2}


SPLIT = {"fused_boundary": "separate"}


def assert_split_matches(cases: list[Case], rows: list[dict[str, object]]) -> None:
    """Each split case passed the gate, matched the one-kernel layer on the same inputs and
    went through split_layer once per layer. The interpreter runs both schedules' operations in
    the same order, so they agree to the bit; compiled for the H200 they differed by up to
    6e-4 with fp16 operands (1e-6 with fp32 IEEE ones), both inside the gate."""
    for case, row in zip(cases, rows, strict=True):
        assert row["fits"], case
        assert row["failed"] == 0, (case, row)
        assert row["padded_rows_zero"] in (None, True), case
        assert row["max_abs_vs_layer"] == 0.0, (case, row)
        assert len(cast(list[object], row["split_blocks"])) == row["layers"], (case, row)


def test_split_boundary_matches_the_layer_kernel_and_the_reference() -> None:
    # The odd shape (3 heads padded to 4, width 96, FFN 80, 40 tokens: a partial row block)
    # with half the tokens padded, and 16 heads of width 8 without a mask.
    odd = {"batch_size": 2, "seq_len": 40, "d_model": 96, "num_heads": 3, "ffn_dim": 80}
    cases: list[Case] = [
        ("cpu-5", "fp32", 0.5, "auto", {**odd, "num_layers": 2}, SPLIT),
        ("cpu-3", "fp32", 0.0, "auto", {}, SPLIT),
    ]
    assert_split_matches(cases, run_interpreted(cases))


def test_split_boundary_honours_the_schedule_and_ieee_operands() -> None:
    # 48 tokens in blocks of 16 rows and 16 keys (three row blocks, up to three key blocks
    # each), FFN columns in blocks of 16; and width 32 with every GEMM group in fp32 IEEE.
    schedule = {**SPLIT, "fused_keys": "16", "fused_ffn_block": "16", "fused_stages": "2"}
    narrow = {"d_model": 64, "ffn_dim": 64, "seq_len": 48, "num_layers": 2}
    cases: list[Case] = [
        ("cpu-5", "fp32", 0.25, "16", narrow, schedule),
        ("cpu-5", "fp32", 0.5, "auto", {}, {**SPLIT, **IEEE_EVERYWHERE}),
    ]
    rows = run_interpreted(cases)
    assert_split_matches(cases, rows)
    blocks = cast(list[dict[str, int]], rows[0]["split_blocks"])
    assert {(b["BM"], b["BN"], b["BF"]) for b in blocks} == {(16, 16, 16)}


def _refusing_seed(name: str, monkeypatch: pytest.MonkeyPatch, most_keys: int) -> Any:
    """The seed whose fused launches the device refuses above `most_keys` keys per block (the
    refusal is the device's edge; what launches returns a marker, 7.0 everywhere), and the
    key blocks it was asked for, in order."""
    import torch
    from triton.runtime.errors import OutOfResources

    seed = load_candidate(track3_workload().seed_entry(), name)
    fused, candidate = sys.modules[f"{name}.fused"], sys.modules[f"{name}.candidate"]
    asked: list[int] = []

    def launch(
        model: object, packs: object, x: torch.Tensor, mask: object, keys_cap: int | None = None
    ) -> torch.Tensor:
        asked.append(fused.fused_meta(model, x, keys_cap)["blocks"]["BN"])
        if asked[-1] > most_keys:
            raise OutOfResources(262144, 232448, "shared memory")
        return torch.full_like(x, 7.0)

    monkeypatch.setattr(fused, "fused_forward", launch)
    monkeypatch.setattr(candidate, "fused_fits", lambda model, x: True)
    return seed, asked


def test_a_launch_the_device_refuses_falls_back_to_the_torch_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    from kernels.track3 import CONFIGS, generate_inputs
    from kernels.track3.reference import build_reference_model

    config = CONFIGS["2"]
    reference = build_reference_model(config, device="cpu", seed=1234)
    x, _ = generate_inputs(config, 1234, 0.0, 1.0, "cpu")
    for tunables, asked_for in (
        ({"fused_kernel": "triton", "fused_keys": "64"}, [64]),  # a value set: no other tried
        ({"fused_kernel": "triton"}, [64, 32, 16]),  # auto: halved down to the least tile
    ):
        seed, asked = _refusing_seed("refused_seed", monkeypatch, most_keys=0)
        model = seed.OptimizedTransformer(config, tunables)
        model.load_state_dict(reference.state_dict(), strict=True)
        with torch.no_grad():
            want = reference(x, valid_token_mask=None)
            first, second = model(x), model(x)
        assert torch.allclose(first, want, atol=1e-5) and torch.equal(first, second)
        assert asked == asked_for, "each schedule is tried once per sizes and regime"

    def broken(model: object, packs: object, x: torch.Tensor, *args: object) -> torch.Tensor:
        raise RuntimeError("a real kernel bug")

    monkeypatch.setattr(sys.modules["refused_seed.fused"], "fused_forward", broken)
    fresh = seed.OptimizedTransformer(config, {"fused_kernel": "triton"})
    with pytest.raises(RuntimeError, match="real kernel bug"), torch.no_grad():
        fresh(x)  # anything but a refusal still fails the candidate


def test_an_auto_key_block_the_device_refuses_is_halved_and_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Looped heads with a normalized softmax ask for every key in one block (the auto rule
    bounds registers, not shared memory); refused, the block is halved until a launch is
    taken, and later calls of those sizes start from the block that was taken."""
    import torch

    from kernels.track3 import CONFIGS, generate_inputs
    from kernels.track3.reference import build_reference_model

    config = CONFIGS["2"]  # 128 keys: the normalized softmax's one block holds them all
    seed, asked = _refusing_seed("halved_seed", monkeypatch, most_keys=32)
    tunables = {"fused_kernel": "triton", "fused_heads": "looped", "fused_softmax": "normalized"}
    model = seed.OptimizedTransformer(config, tunables)
    model.load_state_dict(build_reference_model(config, "cpu", seed=1234).state_dict())
    x, _ = generate_inputs(config, 1234, 0.0, 1.0, "cpu")
    with torch.no_grad():
        first, second = model(x), model(x)
    assert torch.equal(first, torch.full_like(x, 7.0)) and torch.equal(second, first)
    assert asked == [128, 64, 32, 32], asked
    assert not model.fused_refused


READS_SCRIPT = r"""
import json, sys, torch
from kernels.candidate_tree import load_candidate
from kernels.track3 import CONFIGS, generate_inputs
from kernels.track3.reference import build_reference_model
from kernels.track3.runtime import call, settings_read
from kernels.track3.workload import track3_workload

seed = load_candidate(track3_workload().seed_entry(), "reads_seed")
reads = []
for width in (64, 32):
    config = CONFIGS["cpu-5"].model_copy(update={"d_model": width, "ffn_dim": width})
    reference = build_reference_model(config, device="cpu", seed=1234)
    model = seed.OptimizedTransformer(config, {"fused_kernel": "triton", "fused_min_width": "64"})
    model.load_state_dict(reference.state_dict(), strict=True)
    call(model, generate_inputs(config, 1234, 0.25, 1.0, "cpu"))
    reads.append(settings_read(model))
print(json.dumps(reads))
"""


def test_the_fused_and_the_torch_path_read_their_own_tunables() -> None:
    """One seed, fused_min_width=64: width 64 runs the fused kernels, width 32 the torch path.
    What each read is what a change must touch to alter it (the screen's reach)."""
    fused, torch_path = (set(cast(list[str], r)) for r in run_interpreted([], READS_SCRIPT))
    shared = {"fused_kernel", "fused_min_width", "graph_capture", "batch_chunk"}
    assert shared <= fused and shared <= torch_path
    fused_only = {"fused_projection_operands", "fused_ffn_operands", "fused_rows", "fused_keys"}
    torch_only = {"matmul_precision", "gelu", "attention", "whole_model_compile"}
    assert fused_only <= fused and not fused_only & torch_path
    assert torch_only <= torch_path and not torch_only & fused


NORMALIZED_SCRIPT = script_comparing("fused_softmax", "online", "max_abs_vs_online")
NORMALIZED = {"fused_softmax": "normalized"}


def test_the_normalized_softmax_auto_schedule_takes_one_pass_where_the_registers_allow() -> None:
    """Under the normalized softmax, auto rows and keys let one key block hold every key
    (one pass, QK^T once) where the score tile allows it; elsewhere, and under the online
    softmax, auto is unchanged, and a chosen key block is kept. (Run 15's normalized repair,
    two passes on 128 tokens, was 0.775x of its parent on the H200.)"""
    import torch

    from kernels.track3 import CONFIGS

    seed = load_candidate(track3_workload().seed_entry(), "seed_auto_schedule")
    fused = sys.modules["seed_auto_schedule.fused"]

    def blocks(config_id: str, **tunables: str) -> tuple[int, int]:
        config = CONFIGS[config_id]
        model = seed.OptimizedTransformer(config, {"fused_kernel": "triton", **tunables})
        x = torch.zeros(1, config.seq_len, config.d_model)  # CPU: no SM count to shrink for
        meta = fused.fused_meta(model, x)["blocks"]
        return meta["BM"], meta["BN"]

    assert blocks("1") == (64, 64)  # online: 128 tokens in two key blocks
    assert blocks("1", fused_softmax="normalized") == (32, 128)  # 4 heads x 32 x 128 fit
    assert blocks("9", fused_softmax="normalized") == (64, 128)  # one head: rows stay
    assert blocks("13", fused_softmax="normalized") == (64, 64)  # 1,024 tokens never fit
    assert blocks("11", fused_softmax="normalized") == blocks("11")  # 16 heads never fit
    assert blocks("1", fused_softmax="normalized", fused_keys="32") == (32, 32)
    # One head's tile at a time: more rows fit beside a block of every key.
    looped = {"fused_softmax": "normalized", "fused_heads": "looped"}
    assert blocks("1", **looped) == (64, 128)
    assert blocks("13", **looped) == (16, 1024)


def test_normalized_softmax_passes_the_gate_and_rounds_otherwise_than_the_online_one() -> None:
    # Rows over several key blocks (16 keys a block, 40 and 64 tokens) and rows whose causal
    # range one key block holds (cpu-3: 32 tokens, 32 keys a block), padded and not, in one
    # kernel per layer and split in two. Probabilities normalized before the PV product round
    # to fp16 otherwise than unnormalized ones: close to the online result, never equal to it
    # (equal would mean the second pass never ran).
    odd = {"batch_size": 2, "seq_len": 40, "d_model": 96, "num_heads": 3, "ffn_dim": 80}
    cases: list[Case] = [
        (
            "cpu-5",
            "fp32",
            0.5,
            "auto",
            {**odd, "num_layers": 2},
            {**NORMALIZED, "fused_keys": "16"},
        ),
        ("cpu-3", "fp32", 0.0, "auto", {}, NORMALIZED),
        ("cpu-2", "fp32", 0.25, "16", {}, {**SPLIT, **NORMALIZED, "fused_keys": "16"}),
    ]
    rows = run_interpreted(cases, NORMALIZED_SCRIPT)
    for case, row in zip(cases, rows, strict=True):
        assert row["fits"], case
        assert row["failed"] == 0, (case, row)
        assert row["padded_rows_zero"] in (None, True), case
        assert 0.0 < cast(float, row["max_abs_vs_online"]) < 2e-3, (case, row)


@pytest.mark.parametrize(
    ("old", "new", "keys"),
    [
        # Two passes (16 keys a block over 32 tokens): the second without its division.
        (
            "p = tl.exp(s - m_i[:, :, None]) / l_i[:, :, None]",
            "p = tl.exp(s - m_i[:, :, None])",
            "16",
        ),
        # One key block covering every row's causal range: the single pass undivided.
        ("_dot(e / tl.sum(e, axis=2)[:, :, None], v", "_dot(e, v", "auto"),
    ],
)
def test_a_normalized_softmax_that_skips_the_division_fails_the_gate(
    tmp_path: Path, old: str, new: str, keys: str
) -> None:
    # Can the check fail? Each of the normalized forms without its division by the row sums.
    script = broken_seed_script(tmp_path, old, new, path="fused_ops.py")
    tunables = {**NORMALIZED, "fused_keys": keys}
    rows = run_interpreted([("cpu-3", "fp32", 0.0, "auto", {}, tunables)], script)
    assert rows[0]["fits"] and rows[0]["failed"] > 0  # type: ignore[operator]


BUNDLED_SCRIPT = r"""
import importlib.util, json, sys, torch
from harness.gate import count_failures
from kernels.candidate_tree import bundle_sources
from kernels.track3 import CONFIGS, generate_inputs
from kernels.track3.reference import build_reference_model
from kernels.track3.workload import track3_workload

workload = track3_workload()
path = sys.argv[2]
with open(path, "w") as out:
    out.write(bundle_sources(workload.seed_sources(), "candidate.py"))
spec = importlib.util.spec_from_file_location("bundled_seed", path)
bundled = importlib.util.module_from_spec(spec)
sys.modules["bundled_seed"] = bundled
spec.loader.exec_module(bundled)
config = CONFIGS["cpu-3"]
reference = build_reference_model(config, device="cpu", seed=1234)
x, _ = generate_inputs(config, 1234, 0.0, 1.0, "cpu")
rows = []
for softmax in json.loads(sys.argv[1]):
    tunables = {"fused_kernel": "triton", "fused_softmax": softmax}
    model = bundled.OptimizedTransformer(config, tunables)
    model.load_state_dict(reference.state_dict(), strict=True)
    with torch.no_grad():
        got, want = bundled.fused_forward(model, model._packs(), x, None), reference(x)
    failed = count_failures(got, want, workload.tolerance)[0]
    rows.append({"fits": bundled.fused_fits(model, x), "failed": failed})
print(json.dumps(rows))
"""


def test_the_exported_single_file_runs_the_fused_kernels(tmp_path: Path) -> None:
    # `ratchet export` ships the seed's eleven modules as one file (H200 benches run that
    # file): its kernels, both softmax forms, must still find each other and pass the gate.
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    forms = json.dumps(["online", "normalized"])
    bundle = str(tmp_path / "submission.py")
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", BUNDLED_SCRIPT, forms, bundle],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert rows == [{"fits": True, "failed": 0}] * 2, rows


@pytest.mark.gpu
@pytest.mark.parametrize("heads", ["batched", "looped"])
@pytest.mark.parametrize("config_id", ["2", "7"])
def test_compiled_normalized_softmax_passes_the_gate_on_cuda(config_id: str, heads: str) -> None:
    """Compiled by Triton (not interpreted): the normalized softmax in one pass (128 keys a
    block hold every row's causal range; auto chooses that here), in both forms per row
    block (64 keys a block), and the online one, each on the gate against the CUDA
    reference, all heads in one tile and one head after another; normalized rounds
    otherwise."""
    import torch

    from harness.gate import count_failures
    from kernels.track3 import CONFIGS, generate_inputs
    from kernels.track3.reference import build_reference_model

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    seed = load_candidate(track3_workload().seed_entry(), "fused_seed_cuda")
    fused = sys.modules["fused_seed_cuda.fused"]
    config = CONFIGS[config_id]
    reference = build_reference_model(config, device="cuda", seed=1234)
    x, mask = generate_inputs(config, 1234, 0.25, 1.0, "cuda")
    with torch.no_grad():
        want = reference(x, valid_token_mask=mask)
    outs = {}
    cases = [
        ("online", "auto"),
        ("normalized", "64"),
        ("normalized", "auto"),
        ("normalized", "128"),
    ]
    for softmax, keys in cases:
        tunables = {"fused_kernel": "triton", "fused_softmax": softmax, "fused_keys": keys}
        model = seed.OptimizedTransformer(config, {**tunables, "fused_heads": heads}).cuda()
        model.load_state_dict(reference.state_dict(), strict=True)
        with torch.no_grad():
            outs[softmax, keys] = got = fused.fused_forward(model, model._packs(), x, mask)
        assert count_failures(got, want, track3_workload().tolerance)[0] == 0, (softmax, keys)
    assert not torch.equal(outs["online", "auto"], outs["normalized", "128"])
    # One pass or two, the same normalized probabilities: equal up to fp32 sum order.
    assert torch.allclose(outs["normalized", "64"], outs["normalized", "128"], atol=1e-3)
    assert torch.equal(outs["normalized", "auto"], outs["normalized", "128"])  # auto: one pass


LOOPED_SCRIPT = script_comparing("fused_heads", "batched", "max_abs_vs_batched")
LOOPED = {"fused_heads": "looped"}


def test_looped_heads_compute_what_batched_heads_compute() -> None:
    # One head after another: 3 heads padded to 4 with a partial row block and padding, 16
    # heads of width 8 in blocks of 16 keys, the normalized softmax, and the split boundary.
    # Per-head out_proj sums in another order than one GEMM over every head: equal to rounding.
    odd = {"batch_size": 2, "seq_len": 40, "d_model": 96, "num_heads": 3, "ffn_dim": 80}
    cases: list[Case] = [
        ("cpu-5", "fp32", 0.5, "auto", {**odd, "num_layers": 2}, LOOPED),
        ("cpu-3", "fp32", 0.0, "16", {}, {**LOOPED, "fused_keys": "16"}),
        ("cpu-1", "fp32", 0.25, "32", {}, {**LOOPED, "fused_softmax": "normalized"}),
        # One key block holds the causal range (32 tokens, auto keys): one pass per head.
        ("cpu-3", "fp32", 0.0, "auto", {}, {**LOOPED, "fused_softmax": "normalized"}),
        ("cpu-2", "fp32", 0.0, "auto", {}, {**LOOPED, **SPLIT, **IEEE_EVERYWHERE}),
    ]
    rows = run_interpreted(cases, LOOPED_SCRIPT)
    for case, row in zip(cases, rows, strict=True):
        assert row["fits"] and row["failed"] == 0, (case, row)
        assert row["padded_rows_zero"] in (None, True), case
        assert cast(float, row["max_abs_vs_batched"]) < 2e-3, (case, row)


@pytest.mark.parametrize(
    ("old", "new", "config_id", "softmax"),
    [
        # Every head's query takes head 0's bias; the last head dropped.
        ("vec + 2 * D + c0", "vec + 2 * D", "cpu-1", "online"),
        ("for head in range(H_PAD):", "for head in range(H_PAD - 1):", "cpu-1", "online"),
        # The one-pass normalized form (32 tokens in one key block) without its division.
        ("ctx = _dot(e / tl.sum(e, axis=1)[:, None], v", "ctx = _dot(e, v", "cpu-3", "normalized"),
    ],
    ids=["query-bias", "last-head", "one-pass-undivided"],
)
def test_broken_looped_heads_fail_the_gate(
    tmp_path: Path, old: str, new: str, config_id: str, softmax: str
) -> None:
    # Can the comparison fail? The looped branch alone broken must not pass.
    script = broken_seed_script(tmp_path, old, new, path="fused_ops.py")
    case: Case = (config_id, "fp32", 0.0, "auto", {}, {**LOOPED, "fused_softmax": softmax})
    rows = run_interpreted([case], script)
    assert rows[0]["fits"] and rows[0]["failed"] > 0  # type: ignore[operator]
