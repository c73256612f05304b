"""The router's policy document: its models, and the loader that validates it with field paths."""
