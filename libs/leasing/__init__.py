"""Services that lead by a fenced lease: the election (`leadership`), the leased service that consumes events
into a world and writes fenced decisions (`leased_service`, with its in-memory inbox), and the retention task
one admission replica runs under its lease. Built on `libs.db` and `libs.messaging`, which build on the
plumbing of `libs.runtime`."""
