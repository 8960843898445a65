"""The HTTP door: the signed decision callback and the read routes (a close's status, a trace export), parsing,
calling one service and mapping its errors to responses.

Imports services, callbacks and http_edge; never the engine's tables.
"""
