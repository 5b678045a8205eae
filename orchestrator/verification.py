"""The verifier at work: each new frontier is replicated in a fresh judge process against the
frontier it replaced, next to an A/A control and a planted-slowdown positive control."""

from __future__ import annotations

import secrets

from harness.models import ArmKind, ArmSpec, EvaluationRequest, Outcome
from harness.trials import correctness_trials, new_salt
from ledger import Record
from orchestrator.evaluation import commit_arm, judge, ratio_dict
from orchestrator.events import EventKind, FrontierDemoted, Verification
from orchestrator.settings import default_timing
from orchestrator.stages import LoopContext, estimate
from orchestrator.workspace import materialize, read_file
from search import VerificationEvidence, VerificationVerdict, decide_verification

PLANTED_ENTRY = "RatchetPlantedSlowdown"
PLANTED = '''


class {planted}({entry}):
    """Positive control planted by the verifier: the same forward, done twice."""

    def forward(self, *args, **kwargs):
        super().forward(*args, **kwargs)
        return super().forward(*args, **kwargs)
'''


def _arms(ctx: LoopContext, sha: str, against: str) -> list[ArmSpec]:
    work = ctx.paths.evals / f"verify-{sha[:12]}"
    entry = ctx.workload.static_policy.entry_point
    file = ctx.workload.candidate_file
    arms = [
        commit_arm(ctx.judging, name, commit, work)
        for name, commit in (("candidate", sha), ("frontier", against), ("twin", sha))
    ]
    # The whole tree (a package's entry imports its siblings), the entry file with the plant.
    planted = materialize(ctx.repo, sha, work / "arms" / "planted") / file
    source = read_file(ctx.repo, sha, file)
    planted.write_text(source + PLANTED.format(planted=PLANTED_ENTRY, entry=entry))
    arms.append(
        ArmSpec(
            name="planted", kind=ArmKind.MODULE, module_path=str(planted), entry_point=PLANTED_ENTRY
        )
    )
    return arms


def verify_frontier(ctx: LoopContext, sha: str, against: str, step: int) -> VerificationVerdict:
    """Run the attack, record its verdict, demote the frontier if the claim did not replicate."""
    judging = ctx.judging
    request = EvaluationRequest(
        evaluation_id=f"{sha}:verify",
        workload=ctx.judging.workload_ref,
        device=ctx.device,
        config_ids=[c for c in ctx.config_set.config_ids if c in judging.runnable_ids],
        arms=_arms(ctx, sha, against),
        trials=correctness_trials(ctx.workload.official_trials[:1], new_salt()),
        timing=ctx.settings.sweep_timing or default_timing(ctx.device, "sweep"),
        seed=secrets.randbelow(2**31),
        torch_threads=judging.torch_threads,
        device_peaks=judging.device_peaks,
    )
    what = f"verifying the frontier {sha[:10]} against {against[:10]}"
    result = judge(judging, request, ctx.paths.evals / f"verify-{sha[:12]}", what)
    ratios = {other: result.aggregate(other) for other in ("frontier", "twin", "planted")}
    replication, aa, planted = (estimate(ratios[k]) for k in ("frontier", "twin", "planted"))
    if result.outcome is Outcome.PASSED and replication and aa and planted:
        evidence = VerificationEvidence(
            replication=replication,
            aa_control=aa,
            positive_control=planted,
            tainted=result.tainted,
        )
        decision = decide_verification(evidence, ctx.noise_floor)
        verdict, reason = decision.verdict, decision.reason
    else:
        # A candidate that fails the judge on fresh inputs has refuted its own claim.
        failed = result.outcome in (Outcome.INCORRECT, Outcome.REJECTED)
        verdict = VerificationVerdict.REFUTED if failed else VerificationVerdict.INCONCLUSIVE
        message = result.message.strip()[:300]
        reason = f"the verification run ended {result.outcome.value}: {message}"
    event = Verification(
        sha=sha,
        against=against,
        verdict=verdict.value,
        reason=reason,
        replication=ratio_dict(ratios["frontier"]),
        aa_control=ratio_dict(ratios["twin"]),
        positive_control=ratio_dict(ratios["planted"]),
        evaluation_outcome=result.outcome.value,
    )
    records: list[Record] = [event.to_event(EventKind.VERIFICATION)]
    if verdict is VerificationVerdict.REFUTED:
        records.append(FrontierDemoted(sha=sha, reason=reason).to_event(EventKind.FRONTIER_DEMOTED))
    ctx.ledger.append_many(records)
    ctx.reporter.line(f"  verifier: {verdict.value}: {reason}")
    return verdict
