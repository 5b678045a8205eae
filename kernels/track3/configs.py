"""The track3 configurations: the 14 official ones and a small CPU set of the same structure."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Track3Config(BaseModel):
    """One track3 shape (attribute names match the organizer's config objects)."""

    model_config = ConfigDict(frozen=True)

    batch_size: int = Field(gt=0, description="B: sequences per call.")
    seq_len: int = Field(gt=0, description="S: positions per sequence.")
    d_model: int = Field(gt=0, description="D: hidden width.")
    num_heads: int = Field(gt=0, description="H: attention heads (D must divide by H).")
    ffn_dim: int = Field(gt=0, description="FFN: inner width of the feed-forward block.")
    num_layers: int = Field(gt=0, description="L: transformer blocks.")
    causal: bool = Field(default=True, description="Causal self-attention.")


def _cfg(b: int, s: int, d: int, h: int, f: int, layers: int) -> Track3Config:
    return Track3Config(
        batch_size=b, seq_len=s, d_model=d, num_heads=h, ffn_dim=f, num_layers=layers
    )


OFFICIAL_CONFIGS: dict[str, Track3Config] = {
    "1": _cfg(64, 128, 128, 4, 128, 4),
    "2": _cfg(1, 128, 128, 4, 128, 4),
    "3": _cfg(4, 128, 128, 4, 128, 4),
    "4": _cfg(16, 128, 128, 4, 128, 4),
    "5": _cfg(128, 128, 128, 4, 128, 4),
    "6": _cfg(10000, 128, 128, 4, 128, 4),
    "7": _cfg(64, 128, 32, 4, 32, 4),
    "8": _cfg(64, 128, 1024, 4, 1024, 4),
    "9": _cfg(64, 128, 128, 1, 128, 4),
    "10": _cfg(64, 128, 128, 2, 128, 4),
    "11": _cfg(64, 128, 128, 16, 128, 4),
    "12": _cfg(64, 32, 128, 4, 128, 4),
    "13": _cfg(64, 1024, 128, 4, 128, 4),
    "14": _cfg(32, 100000, 1024, 16, 1024, 2),
}

# Same structure, sized for a 2-core laptop: B in {1,4}, S in {32,128}, D in {32,128},
# heads in {1,4,16}. Ids are prefixed so they can never be mistaken for official ids.
CPU_CONFIGS: dict[str, Track3Config] = {
    "cpu-1": _cfg(4, 128, 128, 4, 128, 4),
    "cpu-2": _cfg(1, 128, 128, 4, 128, 4),
    "cpu-3": _cfg(4, 32, 128, 16, 128, 4),
    "cpu-4": _cfg(4, 128, 32, 1, 32, 4),
    "cpu-5": _cfg(1, 32, 32, 4, 32, 4),
}

CONFIGS: dict[str, Track3Config] = {**OFFICIAL_CONFIGS, **CPU_CONFIGS}
