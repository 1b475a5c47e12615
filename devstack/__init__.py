"""Developer tooling: the whole stack as local processes for make run, tests and benches."""
