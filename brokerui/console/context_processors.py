from brokerui.access import services as access
from brokerui.console.roles import can_operate
from streams.protocol.security import Role


def roles(request):
    """``is_operator``: whether the user may change what this page is about (its topic or
    group, else the cluster); ``role_label``: the user's role as the header shows it."""
    user = getattr(request, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return {"is_operator": False, "role_label": ""}
    return {"is_operator": can_operate(request), "role_label": _label(access.grants_for(user))}


def _label(grants) -> str:
    """The role as the header shows it: operator, viewer, or, where bindings differ by topic
    or group, the best of them marked as scoped ("viewer, operator (scoped)")."""
    names = {Role.OPERATOR: "operator", Role.VIEWER: "viewer", Role.NONE: "no role"}
    on_cluster, best = grants.cluster_role(), grants.highest()
    if on_cluster == best:
        return names[best]
    scoped = f"{names[best]} (scoped)"
    return f"{names[on_cluster]}, {scoped}" if on_cluster > Role.NONE else scoped
