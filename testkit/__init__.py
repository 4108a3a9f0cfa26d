"""Helpers that the tests and the benchmark share (neither imports the other)."""
