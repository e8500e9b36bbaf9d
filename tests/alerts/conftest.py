"""The alert tests judge groups on the group tests' store, coordinator and hand-advanced clock."""

from tests.groups.conftest import clock, coordinator, store  # noqa: F401 - shared fixtures
