"""A tiny workload whose fastest schedule depends on the shapes (a matrix chain's order)."""

from kernels.matchain.workload import MatchainConfig, matchain_workload

__all__ = ["MatchainConfig", "matchain_workload"]
