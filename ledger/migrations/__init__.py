"""The ledger's alembic environment (env.py) and migrations (versions/), run by ledger.migrate."""
