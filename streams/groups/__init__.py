"""Consumer groups: the coordinator, committed offsets in ``__consumer_offsets``, lag and
offset reset plans."""

from streams.groups.coordinator import GroupCoordinator, GroupState
from streams.groups.lag import GroupLag, PartitionLag, group_lag
from streams.groups.reset import ResetPlan, ResetScope, ResetStrategy, execute_plan, plan_reset

__all__ = [
    "GroupCoordinator",
    "GroupLag",
    "GroupState",
    "PartitionLag",
    "ResetPlan",
    "ResetScope",
    "ResetStrategy",
    "execute_plan",
    "group_lag",
    "plan_reset",
]
