"""Test suite of the Ratchet project."""
