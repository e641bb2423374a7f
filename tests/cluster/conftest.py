"""The control-plane fixtures (see tests/cluster/fixtures.py)."""

from tests.cluster.fixtures import control_plane, cluster_namespace  # noqa: F401
