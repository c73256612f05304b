"""Benchmarks. Each module `bench/<name>.py` defines `add_arguments(parser)` and `run(args) -> dict`
returning `{"name", "params", "metrics"}` with flat snake_case metric keys that carry their unit."""
