"""The control-plane fixtures (see tests/cluster/fixtures.py)."""

from tests.cluster.fixtures import control_plane, namespace  # noqa: F401
