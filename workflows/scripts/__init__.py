"""Thin entry points of the reproduction experiments (each also runs as a script)."""
