"""Ledger schema migrations, one module per alembic revision, each frozen once released."""
