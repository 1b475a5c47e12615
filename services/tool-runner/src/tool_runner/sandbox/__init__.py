"""Sandbox backends that run a shell command in isolation: bwrap, docker, none."""
