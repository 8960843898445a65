"""Bank statements and ledgers as banks and ERPs export them, read into the one books format the engine loads.

Reads files and writes files; imports nothing of ours and touches no database (ADR 0033). The books format is
documented in docs/books-format.md with a JSON Schema per file in docs/schemas/books/.
"""
