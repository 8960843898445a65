"""Per-principal API tokens for the read API (`GET /closes/{id}`).

Only the SHA-256 of a token is stored; the token itself is printed once by `countersign principals token NAME`.
The owner issues and revokes tokens; the callbacks role only reads them to authenticate a reader.

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

SQL = """
CREATE TABLE api_token (
    token_sha256 bytea PRIMARY KEY CHECK (octet_length(token_sha256) = 32),
    principal_id text NOT NULL REFERENCES principal,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz NULL CHECK (revoked_at IS NULL OR revoked_at >= created_at)
);
CREATE INDEX api_token_principal ON api_token (principal_id);
GRANT SELECT ON api_token TO countersign_callbacks;
"""


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
