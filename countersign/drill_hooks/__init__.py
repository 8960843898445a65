"""Deterministic kill points for the restart drill. Inert unless a drill names a point in the environment.

Imports nothing of ours; every room may import it.
"""
