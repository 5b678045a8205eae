"""Workloads and candidate code: references, inputs, configurations, seed candidates."""
