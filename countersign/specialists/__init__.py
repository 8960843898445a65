"""The specialists wing: the agents (reconciliation, accruals, variance, narration, certificates), their A2A server
and agent cards, the wire format, the client transport, grounding and the guards that judge model output.

Imports models, retrieval, certificates, policy and audit; never the engine, its tables or a door. Only the engine,
the root, scenarios, evals and the CLI import it.
"""
