"""Example Crayfish tool service: `db_query`, read-only SQL over a SQLite file."""
