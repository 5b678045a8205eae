"""Write seed-candidate variants (bundled, tunables set) for hand-run GPU probes: NAME=k:v,k:v"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents.tunables import read_tunables, write_tunables  # noqa: E402
from kernels.registry import resolve_workload  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    source = resolve_workload("track3").seed_bundle()  # one file, the package bundled
    for spec in sys.argv[2:]:
        name, _, pairs = spec.partition("=")
        chosen = dict(p.split(":") for p in pairs.split(",") if p)
        text = write_tunables(source, {**read_tunables(source), **chosen})
        (out / f"{name}.py").write_text(text)
        print(out / f"{name}.py", chosen)


if __name__ == "__main__":
    main()
