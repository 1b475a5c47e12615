"""Fault and bad-input suites against the real stack with the fake LLM; each prints figures."""
