"""Alembic environment: runs the hand-written SQL revisions against the URL the composition root supplies."""

from alembic import context
from sqlalchemy import create_engine, pool

url = context.config.get_main_option("sqlalchemy.url")
if not url:
    raise RuntimeError("countersign/migrations/env.py: sqlalchemy.url is not set; run through `countersign db upgrade`")

engine = create_engine(url, poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(connection=connection, transactional_ddl=True)
    with context.begin_transaction():
        context.run_migrations()
