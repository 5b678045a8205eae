"""Dynamo's compiled frames forgotten between configs, so no config is timed on another's."""

from __future__ import annotations

import sys


def forget_compiled_frames() -> None:
    """Drop every frame Dynamo compiled in this process (a no-op when nothing imported it).

    Dynamo caches compiled frames per code object and, past its recompile limit (8), runs
    the frame eagerly from then on, silently. A candidate that compiles its forward with
    static shapes meets a new shape on every config, so without this its later configs were
    judged eager: on the H200 (search run 8) one candidate measured 1.35 ms on a config in one
    sweep and 0.72 ms in the next, its whole-model compile dropped after config 5."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()
