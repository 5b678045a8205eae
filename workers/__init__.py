"""Evaluation and expansion workers on other hosts (Ray): a room of its own."""
