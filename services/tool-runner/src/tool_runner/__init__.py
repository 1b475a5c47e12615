"""Crayfish tool-runner: sandboxed exec and workspace file tools over gRPC."""
