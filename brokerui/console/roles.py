"""The console's roles, enforced where a request names what it acts on.

Viewers read, operators also change things (create, edit and delete topics, produce, purge,
reset offsets). Roles are bound to scopes (brokerui.access): a cluster, or topics and groups
by name or prefix. A request's *resources* are what its URL names (`resources_of`): the topic
of ``topics/<name>/...`` and ``topics/<topic>/messages/``, the group of ``groups/<id>/...``,
the same in the JSON API; a request that names none is about the cluster itself.
`AccessMiddleware` refuses (403) a request whose user may not read each resource it names;
`operator_required` refuses a change to one who is not operator on each (or, naming none, on
the cluster). Superusers are operators everywhere.
"""

from __future__ import annotations

from functools import wraps

from django.core.exceptions import PermissionDenied

from brokerui.access import grants as g
from brokerui.access import services as access
from streams.protocol.security import Role

VIEWER = access.VIEWER_GROUP
OPERATOR = access.OPERATOR_GROUP
OPERATOR_MESSAGE = "This needs the operator role."

# URL keyword -> (the kind of resource it names, the URL names it applies to: None for all)
_URL_RESOURCES = (
    ("topic", g.TOPIC, None),
    ("name", g.TOPIC, ("topic",)),  # console "topic", "topic_config", API "topic-detail", ...
    ("group_id", g.GROUP, ("group",)),
)


def resources_of(match) -> list[tuple[str, str]]:
    """The topics and groups a resolved URL names."""
    if match is None:
        return []
    out = []
    url_name = match.url_name or ""
    for keyword, kind, prefixes in _URL_RESOURCES:
        if keyword in match.kwargs and (prefixes is None or url_name.startswith(prefixes)):
            out.append((kind, str(match.kwargs[keyword])))
    return out


def is_operator(user) -> bool:
    """Operator on the current cluster as a whole."""
    return access.may(user, Role.OPERATOR)


def may_operate_somewhere(user) -> bool:
    """Operator of the cluster or of some of its topics or groups (who may open a form whose
    target is named in it, such as a new topic's)."""
    return access.grants_for(user).highest() >= Role.OPERATOR


def may_operate(user, resources: list[tuple[str, str]]) -> bool:
    if not resources:
        return is_operator(user)
    return all(access.may(user, Role.OPERATOR, kind, name) for kind, name in resources)


def may_read(user, resources: list[tuple[str, str]]) -> bool:
    if not resources:
        return access.grants_for(user).highest() >= Role.VIEWER
    return all(access.may(user, Role.VIEWER, kind, name) for kind, name in resources)


def refusal_text(user, resources: list[tuple[str, str]], role: str) -> str:
    """Why `user` is refused: the resource is named to a user whose roles differ by scope."""
    scoped = any(b.kind != g.CLUSTER for b in access.grants_for(user).bindings)
    if not resources or not scoped:
        return OPERATOR_MESSAGE if role == "operator" else f"This needs the {role} role."
    kind, name = resources[0]
    return f"This needs the {role} role on the {kind} {name}."


def can_operate(request) -> bool:
    """Whether the request's user is operator on what its URL names (for a page's buttons)."""
    return may_operate(request.user, resources_of(getattr(request, "resolver_match", None)))


def require_operator(user, kind: str, name: str) -> None:
    """Refuse (403) unless `user` is operator on `kind` `name` (a name that is not in the URL,
    such as a new topic's)."""
    if not access.may(user, Role.OPERATOR, kind, name):
        raise PermissionDenied(refusal_text(user, [(kind, name)], "operator"))


def operator_required(view):
    """Refuse (403) a mutating view to anyone who is not operator on what it acts on."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        found = resources_of(getattr(request, "resolver_match", None))
        if not may_operate(request.user, found):
            raise PermissionDenied(refusal_text(request.user, found, "operator"))
        return view(request, *args, **kwargs)

    return wrapper


class AccessMiddleware:
    """A page or API request for a topic or group its user may not read: 403 (after the login
    check, so an anonymous user is still sent to the login page)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if not getattr(request.user, "is_authenticated", False):
            return None
        found = resources_of(request.resolver_match)
        if found and not may_read(request.user, found):
            raise PermissionDenied(refusal_text(request.user, found, "viewer"))
        return None
