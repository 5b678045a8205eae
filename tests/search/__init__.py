"""Tests of the pure search decision logic."""
