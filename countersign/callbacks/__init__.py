"""The decision boundary: the one writer of `gate_decision`, principals, signatures (HMAC and a person's own key),
callers and read tokens.

Imports policy and audit only: the engine cannot reach the writer, and the writer needs nothing of the engine.
"""
