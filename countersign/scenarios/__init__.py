"""Demos, drills and scripted people: `make demo`, the certificate demo, the restart and chaos drills.

They drive the product through the root's wiring like any process; only the CLI and `bench/` import them.
"""
