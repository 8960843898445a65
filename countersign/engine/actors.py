"""Who the engine is in the trace.

The engine's database role may append events only as a machine principal (migration 0006). When a person asked
for the work (started a close, loaded a bank feed), the engine is the actor and the person is named in the payload.
"""

ENGINE_ACTOR = "orchestrator"
