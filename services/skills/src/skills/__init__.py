"""Crayfish skills service: a catalog of SKILL.md skill folders served over gRPC."""
