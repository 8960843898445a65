"""The store: the only SQL outside the migrations, one module per table family, typed rows whose states are Enums.

`countersign.states` names every stored state as a StrEnum (its values are the strings the database holds);
`countersign.store.gates` is the one read of a gate: its row, what `gate_state` derives from its decisions, its close
and task, and every decision on it. The other modules read and write their family's tables (closes and their tasks,
principals, books, journals, the close's inputs and bank lines, the certificates workflow's runs, construction sets,
the drills' counts, payment notices, decision keys, the passkey ceremonies' enrolments, credentials, challenges and
board sessions, the decision writer's decisions and its gate lock, the close's advisory lock, the specialist
dispatches, the outbox, the job engine's statements and its counts, the trace's queue, sealed log, head and signed
checkpoints) on the caller's connection, inside the caller's
transaction; `countersign.store.board_reads` holds the Close Board's read-only joins across the families. Each
module's docstring names its tables and its callers. The modules still writing their own SQL are listed in
tests/store/test_sql_lives_in_the_store.py, a list that only shrinks.

May import psycopg, the drill hooks and the pure rooms below it, and nothing above (an import-linter contract holds
it); every room but the pure ones may import it, except `countersign.store.decisions`: the decision writer's
statements, which only `countersign.callbacks` may import (another contract); and the workflow handlers may not import
`countersign.store.runs`, whose moves only the supervisor calls (a contract, and tests/store/test_runs_store.py).
"""
