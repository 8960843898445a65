"""Bounds every HTTP door sets: a bounded uvicorn protocol (headers, body and idle timeouts) and an ASGI body limit.

Imports nothing of ours.
"""
