"""Crayfish browser service: a Chromium per session behind the SSRF guard, as tools over gRPC."""
