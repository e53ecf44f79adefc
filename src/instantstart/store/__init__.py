"""Persistence: SQLAlchemy 2 models, the database handle, and Alembic migrations."""
