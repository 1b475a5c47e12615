"""Crayfish memory service: chunk, embed and index workspace notes; search them with citations."""
