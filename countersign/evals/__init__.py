"""The evaluation harnesses: narratives, injection, gate derivation, certificate invariants and duplicates, clause
retrieval, with one precision/recall and one report format.

May import the domains, the specialists and the engine's pure parts; only the CLI and `bench/` import it.
"""
