"""Alembic migrations: the schema, roles, grants and triggers that enforce the guarantees in the database."""
