"""Pure search decisions: verdicts, lineage, parent and idea sampling, and the objective."""

from search.candidate_sampler import ParentChoice, SpeedBand, choose_parent
from search.composition import (
    CompositionSettings,
    DispatchLeaf,
    DispatchNode,
    DispatchPlan,
    RegimeVariant,
    ThresholdSplit,
    dispatch_leaves,
    plan_dispatch,
)
from search.idea_sampler import (
    IdeaArm,
    IdeaChoice,
    PriorStrength,
    choose_idea,
    posterior_parameters,
    prior_parameters,
)
from search.lineage import CladeCount, LineageNode, NodeOutcome, count_clades
from search.objective import (
    ConfigTiming,
    ObjectiveKind,
    ObjectiveSpec,
    ObjectiveValue,
    compute_objective,
    geometric_mean,
)
from search.promotion import (
    Change,
    Decision,
    RatioEstimate,
    Verdict,
    VerdictEvidence,
    classify_change,
    decide_verdict,
    screen_filter,
)
from search.verification import (
    VerificationDecision,
    VerificationEvidence,
    VerificationVerdict,
    decide_verification,
)

__all__ = [
    "Change",
    "CladeCount",
    "CompositionSettings",
    "ConfigTiming",
    "Decision",
    "DispatchLeaf",
    "DispatchNode",
    "DispatchPlan",
    "IdeaArm",
    "IdeaChoice",
    "LineageNode",
    "NodeOutcome",
    "ObjectiveKind",
    "ObjectiveSpec",
    "ObjectiveValue",
    "ParentChoice",
    "PriorStrength",
    "RatioEstimate",
    "RegimeVariant",
    "SpeedBand",
    "ThresholdSplit",
    "Verdict",
    "VerdictEvidence",
    "VerificationDecision",
    "VerificationEvidence",
    "VerificationVerdict",
    "choose_idea",
    "choose_parent",
    "classify_change",
    "compute_objective",
    "count_clades",
    "decide_verdict",
    "decide_verification",
    "dispatch_leaves",
    "geometric_mean",
    "plan_dispatch",
    "posterior_parameters",
    "prior_parameters",
    "screen_filter",
]
