"""Bounds every door sets at its edge: a bounded uvicorn protocol (headers, body and idle timeouts), an ASGI body limit,
and the text PostgreSQL can store (`storable.storable_text`, run on every identity and reason before it is written).

Imports nothing of ours.
"""
