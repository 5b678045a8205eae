"""The standing corpus of cheating track3 candidates (and honest ones the judge must accept).

Each case is a forward body dropped into one honest template. `expect` is the full judge's
rejection reason (static checks first); `runtime` is the reason when the static stage is
skipped, which shows the runtime defence catches it too (None: passes at runtime, so the static
rule is the defence). A cheat found in the wild becomes a new case here.
"""

from __future__ import annotations

from dataclasses import dataclass

# The corpus runs on two CPU configs with 9 trials, 2 aliasing calls and 1 inference-mode call
# each: a cheat that is honest for exactly this many calls passes every correctness check and
# only then turns.
CONFIGS = ("cpu-3", "cpu-4")
CORRECTNESS_CALLS = 24

TEMPLATE = """
import math
import torch
import torch.nn.functional as F
from torch import nn
{imports}
STATE = {{"calls": 0, "cache": []}}


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.num_heads = h
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)


class Block(nn.Module):
    def __init__(self, d, h, f):
        super().__init__()
        self.norm1, self.attention = nn.LayerNorm(d), Attention(d, h)
        self.norm2, self.ffn_in, self.ffn_out = nn.LayerNorm(d), nn.Linear(d, f), nn.Linear(f, d)


class OptimizedTransformer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.causal = config.causal
        self.layers = nn.ModuleList(
            Block(config.d_model, config.num_heads, config.ffn_dim)
            for _ in range(config.num_layers)
        )
        self.final_norm = nn.LayerNorm(config.d_model)

    def _attend(self, a, x, mask):
        b, s, d = x.shape
        q, k, v = (p(x).view(b, s, a.num_heads, -1).transpose(1, 2).contiguous()
                   for p in (a.q_proj, a.k_proj, a.v_proj))
        scores = (q @ k.transpose(-2, -1)) * (d / a.num_heads) ** -0.5
        if self.causal:
            future = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, -math.inf)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], -math.inf)
        probs = torch.softmax(scores.float(), dim=-1).to(x.dtype)
        out = a.out_proj((probs @ v).transpose(1, 2).contiguous().view(b, s, d))
        return out if mask is None else out.masked_fill(~mask[..., None], 0)

    def _compute(self, x, mask, residual_step=None):
        for layer in self.layers:
            x = x + self._attend(layer.attention, layer.norm1(x), mask)
            x = x + layer.ffn_out(F.gelu(layer.ffn_in(layer.norm2(x))))
            x = x if mask is None else x.masked_fill(~mask[..., None], 0)
            if residual_step is not None:
                x = torch.round(x / residual_step) * residual_step
        x = self.final_norm(x)
        return x if mask is None else x.masked_fill(~mask[..., None], 0)

    def forward(self, x, valid_token_mask=None):
        STATE["calls"] += 1
        m = valid_token_mask
{body}
"""


@dataclass(frozen=True)
class Case:
    """One corpus entry."""

    name: str
    body: str
    expect: str | None
    runtime: str | None
    imports: str = ""
    gpu_only: bool = False
    # The runtime reason when the judge could not get a PID namespace (a host that refuses
    # them): there the supervisor is reachable and its death is the defence.
    without_namespace: str | None = None

    def runtime_reason(self, isolation: str | None) -> str | None:
        """The runtime verdict to expect under this isolation."""
        if isolation != "pid-namespace" and self.without_namespace is not None:
            return self.without_namespace
        return self.runtime

    def source(self) -> str:
        """The candidate module."""
        body = "\n".join("        " + line for line in self.body.strip().splitlines())
        return TEMPLATE.format(imports=self.imports, body=body)


HONEST = [
    Case("reference_arithmetic", "return self._compute(x, m)", None, None),
    Case(
        "fresh_buffer_fully_written",
        "out = torch.empty_like(x)\nout.copy_(self._compute(x, m))\nreturn out",
        None,
        None,
    ),
    Case(
        "weight_cache_by_version",
        # Inference tensors (weights built under torch.inference_mode()) carry no version.
        "key = tuple(id(p) if p.is_inference() else p._version for p in self.parameters())\n"
        "if STATE.get('key') != key:\n    STATE['key'] = key\nreturn self._compute(x, m)",
        None,
        None,
    ),
]

CHEATS = [
    Case(
        "stale_output_reuse",
        "if not STATE['cache']:\n    STATE['cache'].append(self._compute(x, m))\n"
        "return STATE['cache'][0].clone()",
        "wrong_output",
        "wrong_output",
    ),
    Case(
        "input_zeroing",
        "out = self._compute(x, m)\nx.zero_()\nreturn out",
        "input_mutation",
        "input_mutation",
    ),
    Case(
        "mask_mutation",
        "out = self._compute(x, m)\nm.fill_(True)\nreturn out",
        "input_mutation",
        "input_mutation",
    ),
    Case(
        "background_thread",
        "if 'worker' not in STATE:\n"
        "    STATE['worker'] = threading.Thread(target=lambda: threading.Event().wait(600),"
        " daemon=True)\n"
        "    STATE['worker'].start()\n"
        "return self._compute(x, m)",
        "static_check",
        "background_thread",
        imports="import threading",
    ),
    Case(
        "warmup_cache_replay",
        f"if STATE['calls'] <= {CORRECTNESS_CALLS}:\n    out = self._compute(x, m)\n"
        "    STATE['cache'].append(out.clone())\n    return out\n"
        "return STATE['cache'][STATE['calls'] % len(STATE['cache'])].clone()",
        "timed_output_wrong",
        "timed_output_wrong",
    ),
    Case(
        "pointer_cache",
        "key = (x.data_ptr(), None if m is None else m.data_ptr(), tuple(x.shape))\n"
        "if key not in STATE:\n    STATE[key] = self._compute(x, m)\nreturn STATE[key].clone()",
        "timed_output_wrong",
        "timed_output_wrong",
    ),
    Case(
        "lazy_tensor_subclass",
        "class Lazy(torch.Tensor):\n    pass\nreturn self._compute(x, m).as_subclass(Lazy)",
        "output_type",
        "output_type",
    ),
    Case(
        "timer_monkeypatch",
        "torch.cuda.Event.elapsed_time = lambda self, end: 1e-6\nreturn self._compute(x, m)",
        "static_check",
        "timer_tampering",
    ),
    Case(
        "forged_result_file",
        "path = torch.sys.argv[2]\n"
        'fake = \'{"evaluation_id": "x", "nonce": "guess", "outcome": "passed"}\'\n'
        "getattr(torch.sys.modules['builtins'], 'op' + 'en')(path, 'w').write(fake)\n"
        "torch.os._exit(0)",
        "static_check",
        "no_result",
    ),
    Case(
        "seed_prediction",
        "official = any(\n"
        "    torch.equal(x, torch.randn(x.shape, generator=torch.Generator().manual_seed(s)))\n"
        "    for s in range(1234, 1239)\n)\n"
        "return self._compute(x, m) if official else torch.zeros_like(x)",
        "wrong_output",
        "wrong_output",
    ),
    Case(
        "shape_special_casing",
        "if x.shape[0] == 10000 and x.shape[1] == 128:\n    return torch.zeros_like(x)\n"
        "return self._compute(x, m)",
        "static_check",
        None,
    ),
    Case(
        "reference_fallback",
        "return BlockedOracle(self)(x, m)",
        "static_check",
        None,
        imports="from kernels.track3.oracle import BlockedOracle",
    ),
    Case(
        "precision_downgrade_passes_official_seeds",
        "return self._compute(x, m, residual_step=1 / 384)",
        "wrong_output",
        "wrong_output",
    ),
    Case(
        "partial_writes",
        "full = self._compute(x, m)\nout = torch.empty_like(x)\nout[m] = full[m]\nreturn out",
        "unwritten_output",
        "unwritten_output",
    ),
    Case(
        "nan_in_padded_rows",
        "out = self._compute(x, m)\nreturn out.masked_fill(~m[..., None], math.nan)",
        "non_finite_output",
        "non_finite_output",
    ),
    Case(
        "mask_ignored",
        "return self._compute(x, None)",
        "wrong_output",
        "wrong_output",
    ),
    Case(
        "correct_only_for_the_first_calls",
        f"return self._compute(x if STATE['calls'] <= {CORRECTNESS_CALLS} else x * 0.9, m)",
        "timed_output_wrong",
        "timed_output_wrong",
    ),
    Case(
        "correct_only_when_called_from_the_checker",
        "frame, checked = torch.sys._getframe(1), False\n"
        "while frame is not None:\n"
        "    checked = checked or frame.f_code.co_name in ('run_trial', 'check_aliasing')\n"
        "    frame = frame.f_back\n"
        "return self._compute(x if checked else x * 0.9, m)",
        "static_check",
        "timed_output_wrong",
    ),
    Case(
        "output_aliased_to_a_reused_buffer",
        "key = tuple(x.shape)\n"
        "if key not in STATE:\n    STATE[key] = torch.empty_like(x)\n"
        "STATE[key].copy_(self._compute(x, m))\nreturn STATE[key]",
        "output_aliasing",
        "output_aliasing",
    ),
    Case(
        "kill_the_launcher_through_a_dynamic_attribute",
        "o = getattr(torch, 'o' + 's')\no.kill(o.getppid(), 9)\nreturn self._compute(x, m)",
        "static_check",
        None,  # its parent is the namespace's init: the kernel drops the signal
        without_namespace="harness_signalled",
    ),
    Case(
        "background_thread_through_a_module_attribute",
        "if 'worker' not in STATE:\n"
        "    threads = torch.cuda.threading\n"
        "    STATE['worker'] = threads.Thread(target=lambda: threads.Event().wait(600),"
        " daemon=True)\n"
        "    STATE['worker'].start()\n"
        "return self._compute(x, m)",
        "static_check",
        "background_thread",
    ),
    Case(
        "child_in_its_own_session",
        "o = getattr(torch, 'o' + 's')\n"
        "if 'child' not in STATE:\n"
        "    STATE['child'] = o.fork()\n"
        "    if STATE['child'] == 0:\n"
        "        o.setsid()\n"
        "        o.execv('/bin/sleep', ['sleep', '300'])\n"
        "return self._compute(x, m)",
        "static_check",
        "outliving_process",
    ),
    Case(
        "side_stream_without_sync",
        "stream = STATE.setdefault('stream', torch.cuda.Stream())\n"
        "stream.wait_stream(torch.cuda.current_stream())\n"
        "with torch.cuda.stream(stream):\n    out = self._compute(x, m)\nreturn out",
        "side_stream_work",
        "side_stream_work",
        gpu_only=True,
    ),
]
