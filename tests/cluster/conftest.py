"""The control-plane fixtures live in tests/cluster/fixtures.py and are shared from tests/conftest.py."""
