"""Replay one expansion step of a finished run with the offline expander: what it changes.

Copies the run's candidate repository to a temporary directory (the run is never written), and
expands the miss MISS (a child of PARENT) with the library idea IDEA for the failing configs
FAILING, over seeds 0..N-1; prints per seed the commit title and the configs whose code the
child changes against the miss. MISS and FAILING given as '-': a plain expansion of PARENT.
No device. Usage:
  python benchmarks/repair_regime_replay.py RUN_DIR PARENT MISS IDEA FAILING [N]
  e.g. run 18's step 5: ... /tmp/run 16a28de75f b340e6fc36 normalized-softmax 13
       run 18's step 6: ... /tmp/run 16a28de75f - fused-width-bound -
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import git  # noqa: E402

from agents.expander import ExpansionRequest, IdeaBrief  # noqa: E402
from agents.offline import OfflineExpander  # noqa: E402
from agents.regimes import changed_configs  # noqa: E402
from orchestrator.workloads import load_workload  # noqa: E402


def main() -> None:
    if len(sys.argv) not in (6, 7):
        sys.exit(__doc__)
    run_dir, parent, miss, idea_id, failing = sys.argv[1:6]
    seeds_text = sys.argv[6] if len(sys.argv) == 7 else "10"
    if not seeds_text.isdigit() or int(seeds_text) < 1:
        sys.exit(f"N must be a positive number of seeds, got {seeds_text!r}; e.g. 10")
    seeds = int(seeds_text)
    workload = load_workload("track3")
    library = json.loads(workload.ideas_file.read_text())
    idea = next((i for i in library if i["slug"] == idea_id), None)
    if idea is None:
        known = ", ".join(i["slug"] for i in library)
        sys.exit(f"no idea {idea_id!r} in {workload.ideas_file}; its ideas: {known}")
    timed = workload.config_set(workload.default_config_set["cuda"]).config_ids
    oracle_only = workload.oracle_only_ids()
    sizes = {c: workload.dispatch_features(c) for c in timed if c not in oracle_only}
    # A FAILING the expander cannot match would silently replay a plain expansion.
    if (miss == "-") != (failing == "-"):
        sys.exit(
            f"MISS {miss!r} and FAILING {failing!r}: give both as '-' (a plain expansion) "
            "or neither (a repair of MISS for its failing configs, e.g. 13 or 7,8)"
        )
    unknown = [c for c in failing.split(",") if failing != "-" and c not in sizes]
    if unknown:
        sys.exit(
            f"FAILING names configs {unknown} that are not timed; give some of "
            f"{', '.join(sizes)} (comma-separated), or '-' with MISS '-'"
        )
    if not (Path(run_dir) / "repo" / ".git").is_dir():
        sys.exit(f"{run_dir} holds no candidate repository (repo/): give a run directory")
    with tempfile.TemporaryDirectory() as tmp:
        repo_dir = Path(tmp) / "repo"
        shutil.copytree(Path(run_dir) / "repo", repo_dir)
        repo = git.Repo(repo_dir)
        plain = miss == "-"
        try:
            parent = repo.git.rev_parse(parent)
            miss = parent if plain else repo.git.rev_parse(miss)
        except git.GitCommandError:
            sys.exit(f"no commit {parent!r} or {miss!r} in {run_dir}/repo: give two of its shas")
        before = repo.git.show(f"{miss}:{workload.candidate_file}")
        misses = {} if plain else {c: 1.0 for c in failing.split(",")}
        targets = idea.get("targets") or {}
        brief = IdeaBrief(idea_id=idea_id, text=idea["text"], source="library", targets=targets)
        for seed in range(seeds):
            request = ExpansionRequest(
                repo_path=repo_dir,
                worktree_root=Path(tmp) / "worktrees",
                parent_sha=parent,
                source_sha=None if plain else miss,
                source_misses=misses,
                branch=f"replay/{seed}",
                candidate_file=workload.candidate_file,
                idea=brief,
                seed=seed,
                config_sizes=sizes,
            )
            result = OfflineExpander().expand(request)
            if result.sha is None:
                print(f"seed {seed}: {result.outcome}: {result.message}")
                continue
            child = repo.git.show(f"{result.sha}:{workload.candidate_file}")
            reached = sorted(changed_configs(before, child, sizes) or [], key=int)
            title = (result.message or "").splitlines()[0]
            print(f"seed {seed}: {title}  -> changes configs {', '.join(reached)}")


if __name__ == "__main__":
    main()
