"""SQLAlchemy implementations of the repository ports; one module per row family."""
