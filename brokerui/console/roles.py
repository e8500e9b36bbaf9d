"""The two roles, as Django groups: viewers read, operators also change things.

Operators create, edit and delete topics, produce, purge and reset offsets. Superusers count as
operators. Every view and API endpoint that changes something checks `is_operator`.
"""

from __future__ import annotations

from functools import wraps

from django.core.exceptions import PermissionDenied

VIEWER = "viewer"
OPERATOR = "operator"


def is_operator(user) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return user.is_superuser or user.groups.filter(name=OPERATOR).exists()


def operator_required(view):
    """Refuse (403) a mutating view to anyone who is not an operator."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not is_operator(request.user):
            raise PermissionDenied("This needs the operator role.")
        return view(request, *args, **kwargs)

    return wrapper
