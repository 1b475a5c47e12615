"""Shared library of the Crayfish services (no domain logic)."""
