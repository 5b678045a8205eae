"""A tiny second workload (naive row softmax) so that nothing assumes one problem."""

from kernels.softmax.workload import SoftmaxConfig, softmax_workload

__all__ = ["SoftmaxConfig", "softmax_workload"]
