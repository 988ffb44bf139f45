"""A third-party pbframework plug-in package (installed by tests/test_registry.py)."""
