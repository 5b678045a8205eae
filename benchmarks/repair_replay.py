"""Which headroom ideas a repair would find open for each narrow miss of a finished run.

Reads a run directory (its ledger and repository; no device). For each candidate that failed
the gate, it prints the failing configs with their tolerance shares and the headroom ideas of
the workload's library that change a tunable read there. Runs whose judge did not report a
failing config's reads (before 83f55af) use the parent's reads on that config, marked
"parent's", as the stand-in. Usage: python benchmarks/repair_replay.py RUN_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import git  # noqa: E402

from agents.mutation import SearchSpace  # noqa: E402
from agents.regimes import regime_reads, serving_regimes  # noqa: E402
from agents.tunables import read_requirements, read_space  # noqa: E402
from ledger import Ledger  # noqa: E402
from orchestrator.idea_arms import changing_arms  # noqa: E402
from orchestrator.state import derive_state  # noqa: E402
from orchestrator.workloads import load_workload  # noqa: E402
from search import Verdict  # noqa: E402


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: repair_replay.py RUN_DIR (a run directory with ledger.sqlite)")
    run = Path(sys.argv[1])
    if not (run / "ledger.sqlite").is_file() or not (run / "repo").is_dir():
        raise SystemExit(f"{run}: not a run directory (no ledger.sqlite and repo/ there)")
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    workload = load_workload(state.run.workload if state.run else "track3")
    repo = git.Repo(run / "repo")
    headroom = [
        a
        for a in state.idea_arms("cuda") + state.idea_arms("cpu")
        if state.ideas[a.idea_id].headroom
    ]
    arms = list({a.idea_id: a for a in headroom}.values())
    targets = {i: dict(state.ideas[i].targets) for i in state.ideas}
    print("| candidate | step | failing configs (tolerance used) | reads | headroom ideas open |")
    print("|---|---:|---|---|---|")
    for cand in sorted(state.candidates.values(), key=lambda c: c.step):
        shares = state.failed_shares(cand.sha)
        if cand.verdict is not Verdict.FAILED_CORRECTNESS or not shares:
            continue
        own = state.settings_read.get(cand.sha, {})
        parent = state.settings_read.get(cand.parent_sha or "", {})
        reads = {c: own[c] if c in own else parent.get(c, set()) for c in shares}
        whose = "own" if all(c in own for c in shares) else "parent's"
        source = repo.git.show(f"{cand.sha}:{workload.candidate_file}")
        sizes = {c: workload.dispatch_features(c) for c in shares}
        space = SearchSpace(values=read_space(source), requires=read_requirements(source))
        regimes = serving_regimes(source, sizes)
        found = changing_arms(arms, targets, regimes, (regime_reads(source, sizes, reads), space))
        failing = ", ".join(f"{c} ({s:.3f})" if s is not None else c for c, s in shares.items())
        names = ", ".join(a.idea_id for a in found) or "none"
        print(f"| {cand.sha[:10]} | {cand.step} | {failing} | {whose} | {names} |")


if __name__ == "__main__":
    main()
