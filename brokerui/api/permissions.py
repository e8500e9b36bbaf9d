"""The console's roles, for the API: viewers read, operators (and superusers) change, each on
the scope its bindings give (brokerui.access): a change to ``topics/<name>`` or
``groups/<id>`` needs the operator role on that topic or group, any other on the cluster.

Authentication (token or session) is required everywhere (``IsAuthenticated``, the default);
``IsOperatorOrReadOnly`` then refuses unsafe methods to non-operators with 403
``operator_required``. An offset reset preview (``dry_run``, the default) changes nothing and is
open to viewers; the view itself asks for the operator role before executing a plan.
"""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from brokerui.console.roles import (
    OPERATOR_MESSAGE,
    may_operate,
    may_read,
    refusal_text,
    resources_of,
)

OPERATOR_CODE = "operator_required"


class IsOperatorOrReadOnly(BasePermission):
    message = OPERATOR_MESSAGE
    code = OPERATOR_CODE

    def has_permission(self, request, view):
        found = resources_of(getattr(request, "resolver_match", None))
        if not may_read(request.user, found):  # a token's user: not seen by AccessMiddleware
            self.message = refusal_text(request.user, found, "viewer")
            return False
        if request.method in SAFE_METHODS:
            return True
        if getattr(view, "action", None) in getattr(view, "read_only_actions", ()):
            return True  # the view checks the operator role itself when it changes something
        if may_operate(request.user, found):
            return True
        self.message = refusal_text(request.user, found, "operator")
        return False
