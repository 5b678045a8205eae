"""The report's remaining sections: ideas and their outcomes, injected messages and their
effect, the noise floor and how it was measured, costs, the environment, the ledger."""

from __future__ import annotations

from orchestrator.report.data import NoiseCalibration, ReportData
from orchestrator.report.document import Block, Heading, Mono, Para, Table
from orchestrator.report.sections import ci
from orchestrator.run_view.common import ratio_of

TIMING_FIELDS = ("warmup_calls", "min_rounds", "max_rounds", "budget_s", "target_half_width")


def idea_blocks(data: ReportData) -> list[Block]:
    """Every idea arm: where it came from, its prior and posterior, what it did."""
    rows = tuple(
        (
            Mono(i.id),
            i.source,
            i.author,
            f"{i.prior_mean:.2f}",
            f"{i.posterior_mean:.2f}",
            str(i.trials),
            str(i.successes),
            "yes" if i.retracted else "",
            i.text,
        )
        for i in data.ideas
    )
    headers = (
        "idea",
        "source",
        "author",
        "prior mean",
        "posterior mean",
        "trials",
        "successes",
        "retracted",
        "text",
    )
    return [
        Heading(2, "Ideas and their outcomes"),
        Para(
            (
                "A success is a candidate measurably faster than its parent; trials count "
                "every scored experiment (infrastructure failures and tainted sweeps are not "
                "scored).",
            )
        ),
        Table(headers, rows),
    ]


def message_blocks(data: ReportData) -> list[Block]:
    """Every injected message, as written, with its effect on the search so far."""
    messages = data.queue.messages
    blocks: list[Block] = [Heading(2, "Steering: injected messages")]
    if not messages:
        return [*blocks, Para(("No message was injected: the search steered itself.",))]
    rows = tuple(
        (
            f"#{m.seq}",
            m.kind,
            m.author,
            m.created_at[:19].replace("T", " "),
            m.text,
            "yes" if m.read else "not yet",
            m.effect,
        )
        for m in messages
    )
    headers = ("id", "kind", "author", "when (UTC)", "text", "read by the search", "effect")
    return [*blocks, Table(headers, rows)]


def _calibration_blocks(noise: NoiseCalibration) -> list[Block]:
    cal = noise.calibration
    origin = (
        f" It was reused from the run in {cal.reused_from}: same device fingerprint, seed, "
        "configs and timing plan."
        if cal.reused_from
        else " It was measured in this run."
    )
    timing = ", ".join(f"{k} {noise.timing[k]}" for k in TIMING_FIELDS if k in noise.timing)
    minimum = f"{noise.minimum_floor:.2%}" if noise.minimum_floor is not None else "unknown"
    classes = ", ".join(f"{k} {v:.2%}" for k, v in cal.classes.items())
    rows = tuple((config, ci(ratio_of(ratio))) for config, ratio in sorted(cal.per_config.items()))
    return [
        Heading(3, f"Config set {cal.config_set}: floor {cal.floor:.2%}"),
        Para(
            (
                "The seed was timed against a byte-identical copy of itself (an A/A run) on every "
                "config, interleaved in ABBA rounds with the sweep's timing plan "
                f"({timing or 'as recorded'}), on the device with fingerprint ",
                Mono(cal.fingerprint_id[:16]),
                ". Any speedup the A/A run shows is noise. The floor "
                "a promotion must clear is how far the aggregate A/A interval "
                f"({ci(ratio_of(cal.aggregate))}) reaches from 1, and at least the configured "
                f"minimum of {minimum}. Excursion by config class: {classes or 'none'}.{origin}",
            )
        ),
        Table(("config", "A/A ratio [95% CI]"), rows),
    ]


def noise_blocks(data: ReportData) -> list[Block]:
    """Each A/A calibration and how it was measured."""
    blocks: list[Block] = [Heading(2, "Noise floor")]
    if not data.noise:
        return [*blocks, Para(("No noise floor was calibrated in this run.",))]
    for noise in data.noise:
        blocks.extend(_calibration_blocks(noise))
    return blocks


def cost_blocks(data: ReportData) -> list[Block]:
    """Time, device seconds, LLM tokens and money, over every invocation."""
    use = data.overview.budgets
    status = data.overview.status
    budget_usd = f" of a ${use.llm_budget_usd:.2f} budget" if use.llm_budget_usd else ""
    rows = (
        (
            "wall time",
            f"{use.wall_s / 60:.1f} min over {use.invocations} invocation(s)"
            + (f" (budget {use.minutes_budget:g} min)" if use.minutes_budget else ""),
        ),
        ("device seconds (judges and agents' benchmarks)", f"{use.device_s:.0f} s"),
        ("LLM calls", str(status.llm_calls)),
        (
            "LLM tokens",
            f"{use.llm_tokens_in} in, {use.llm_tokens_out} out, {use.llm_tokens_cached} cached",
        ),
        ("LLM cost", f"${use.llm_usd:.2f}{budget_usd}"),
    )
    return [Heading(2, "Costs"), Table(("what", "used"), rows)]


def environment_blocks(data: ReportData) -> list[Block]:
    """Every device the run was qualified on: its fingerprint and measured figures."""
    blocks: list[Block] = [Heading(2, "Environment")]
    devices = data.overview.devices
    if not devices:
        return [*blocks, Para(("No device was qualified.",))]
    for device in devices:
        blocks.append(Para(("Device fingerprint ", Mono(device.fingerprint_id), ":")))
        rows = [(k, str(v)) for k, v in sorted(device.environment.items())]
        rows += [(f"measured {k}", f"{v:.4g}") for k, v in sorted(device.figures.items())]
        blocks.append(Table(("property", "value"), tuple(rows)))
    return blocks


def ledger_blocks(data: ReportData) -> list[Block]:
    """The chain this report was read from."""
    chain, check = data.chain, data.chain_check
    counts = ", ".join(f"{n} {kind}" for kind, n in chain.counts.items())
    fresh = check.checked_from_seq <= check.head_seq
    checked = (
        f"entries {check.checked_from_seq} to {check.head_seq} were checked (those before "
        "were verified earlier)"
        if fresh
        else "nothing had been appended since it was last verified"
    )
    return [
        Heading(2, "Ledger"),
        Para(
            (
                "Read at head ",
                Mono(data.head),
                f" ({counts}). The hash chain verified before it was read: {checked}. "
                "Verify it in full with ",
                Mono(f"ratchet ledger verify --run-dir {data.run_dir}"),
                ".",
            )
        ),
    ]
