"""Typed reads of the tables more than one room reads, and the states those tables store.

`countersign.store.states` names every stored state as a StrEnum (its values are the strings the database holds);
`countersign.store.gates` is the one read of a gate: its row, what `gate_state` derives from its decisions, its close
and task,
and every decision on it. The engine, the decision writer, the services and the doors all read gates through it.

May import psycopg and nothing else of Countersign (an import-linter contract holds it); every room but the pure
ones may import it. It reads; it never writes.
"""
