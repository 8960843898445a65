"""The composition root: settings, database roles and pools, migrations, the runtime a process boots, the ASGI app
factory, metrics, telemetry and shutdown. Wiring only: no use case lives here.

Nothing below it imports it; scenarios and the CLI do.
"""
