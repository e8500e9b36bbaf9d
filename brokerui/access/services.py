"""Who may do what, for every path into the console: pages, the JSON API, WebSockets,
``/metrics`` and the Kafka port all ask `grants_for`.

A user's bindings are their own, their groups' (Django groups; an OIDC login keeps a user's
groups in step with the provider's), and the two cluster-wide roles of old: membership of the
group ``operator`` is an operator binding on every cluster, ``viewer`` a viewer binding. A
superuser is operator everywhere. A console user with no binding at all reads every cluster's
pages, as before bindings existed (``console_default``); the Kafka port grants such a user
nothing, as it always has. Bindings are managed on the Access page, each change audited
(``access.bind`` / ``access.unbind``).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction

from brokerui import cluster
from brokerui.access import grants as g
from brokerui.access import masking
from brokerui.access.models import MaskRule, RoleBinding
from brokerui.audit.services import Actor, AuditSink
from streams.protocol.security import Role

OPERATOR_GROUP = "operator"
VIEWER_GROUP = "viewer"
_CACHE = "_tidelog_grants"  # on the user object: one request's (or one socket's) look-ups


def _current_cluster() -> str:
    return cluster.current().name


def bindings_of(user, *, console_default: bool) -> tuple[g.Binding, ...]:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return ()
    if user.is_superuser:
        return g.EVERYTHING
    groups = set(user.groups.values_list("name", flat=True))
    out: list[g.Binding] = []
    if OPERATOR_GROUP in groups:
        out.append(g.Binding(Role.OPERATOR, g.ANY_CLUSTER, g.CLUSTER))
    if VIEWER_GROUP in groups:
        out.append(g.Binding(Role.VIEWER, g.ANY_CLUSTER, g.CLUSTER))
    rows = RoleBinding.objects.filter(subject_type=RoleBinding.USER, subject=user.get_username())
    rows = rows | RoleBinding.objects.filter(subject_type=RoleBinding.GROUP, subject__in=groups)
    out += [row.as_binding() for row in rows]
    if not out and console_default:
        return g.READ_EVERYTHING
    return tuple(out)


def grants_for(
    user, cluster: str | None = None, *, console_default: bool = True
) -> g.BindingGrants:
    """`user`'s grants on `cluster` (the current one by default), looked up once per user
    object (a request's, or a WebSocket's for its life)."""
    cluster = cluster or _current_cluster()
    key = (cluster, console_default)
    cache = getattr(user, _CACHE, None)
    if cache is None:
        cache = {}
        try:
            setattr(user, _CACHE, cache)
        except AttributeError:  # AnonymousUser and other slotted stand-ins
            pass
    if key not in cache:
        cache[key] = g.BindingGrants.of(cluster, bindings_of(user, console_default=console_default))
    return cache[key]


def forget(user) -> None:
    """Drop `user`'s looked-up grants (after their bindings changed)."""
    if hasattr(user, _CACHE):
        delattr(user, _CACHE)


def may(user, role: Role, kind: str = g.CLUSTER, name: str = "") -> bool:
    grants = grants_for(user)
    if kind == g.CLUSTER:
        return grants.cluster_role() >= role
    return grants.role_on(kind, name) >= role


def visible(user, kind: str, names) -> list[str]:
    """Of `names`, those `user` may read on the current cluster."""
    return grants_for(user).visible(kind, names)


def group_id(item) -> str:
    return item.group_id


def visible_items(user, kind: str, items, name=lambda item: item.name) -> list:
    """Of `items` (topics, groups, rows with a name), those `user` may read."""
    grants = grants_for(user)
    items = list(items)
    if grants.cluster_role() >= Role.VIEWER:
        return items
    return [item for item in items if grants.role_on(kind, name(item)) >= Role.VIEWER]


# ---------------------------------------------------------------------- the Access page


def may_manage(user) -> bool:
    """Who manages bindings: a superuser, or an operator of every cluster (Kafka's ALTER on
    the cluster, for the console as a whole)."""
    everywhere = g.Binding(Role.OPERATOR, g.ANY_CLUSTER, g.CLUSTER)
    return everywhere in bindings_of(user, console_default=False)


def access_read(user, clusters: list[str]) -> dict:
    """The Access page: every binding, what can be bound, and whether `user` may change them."""
    return {
        "bindings": bindings_list(),
        "mask_rules": mask_rules_list(),
        "subjects": subjects(),
        "clusters": clusters,
        "can_manage": may_manage(user),
    }


def bindings_list() -> list[RoleBinding]:
    return list(RoleBinding.objects.select_related("created_by"))


def subjects() -> dict[str, list[str]]:
    """What the Access page offers to bind: the users, and the groups (Django's and any named
    in a binding, such as an OIDC provider's not yet seen at a login)."""
    User = get_user_model()
    groups = set(Group.objects.values_list("name", flat=True))
    groups |= set(
        RoleBinding.objects.filter(subject_type=RoleBinding.GROUP).values_list("subject", flat=True)
    )
    users = User.objects.filter(is_active=True).values_list(User.USERNAME_FIELD, flat=True)
    return {"users": sorted(users), "groups": sorted(groups)}


def binding_add(
    *, sink: AuditSink, actor: Actor, subject_type: str, subject: str, role: str, cluster: str,
    kind: str, pattern: str, clusters: list[str],
) -> RoleBinding:  # fmt: skip
    """Keep one binding (BadBinding with the reason when a field is wrong), audited."""
    if subject_type not in (RoleBinding.USER, RoleBinding.GROUP):
        raise g.BadBinding(f"subject must be a user or a group, not {subject_type!r}")
    subject = subject.strip()
    if not subject:
        raise g.BadBinding(f"name the {subject_type} to bind")
    g.role_named(role)
    if cluster != g.ANY_CLUSTER and cluster not in clusters:
        raise g.BadBinding(f"no cluster is named {cluster!r} (clusters: {', '.join(clusters)})")
    pattern = g.check_pattern(kind, pattern)
    try:
        with transaction.atomic():
            row = RoleBinding.objects.create(
                subject_type=subject_type, subject=subject, role=role, cluster=cluster,
                kind=kind, pattern=pattern, created_by=actor.user,
            )  # fmt: skip
    except IntegrityError:
        raise g.BadBinding("that binding exists already") from None
    actor.record(sink, "access.bind", f"{subject_type}:{subject}", after=_audited(row))
    return row


def binding_remove(*, sink: AuditSink, actor: Actor, pk: int) -> RoleBinding:
    row = RoleBinding.objects.get(pk=pk)
    before = _audited(row)
    row.delete()
    actor.record(sink, "access.unbind", f"{row.subject_type}:{row.subject}", before=before)
    return row


def _audited(row: RoleBinding) -> dict:
    return {"role": row.role, "cluster": row.cluster, "kind": row.kind, "pattern": row.pattern}


# ---------------------------------------------------------------------- field masking

UNMASK_PERMISSION = "access.unmask"


def masker_for(user, topic: str) -> masking.Masker:
    """The masking `user` sees `topic`'s records through: none with the unmask permission
    (superusers have it), else the rules whose pattern matches `topic`."""
    if user is not None and user.has_perm(UNMASK_PERMISSION):
        return masking.Masker((), topic)
    rules = [row.as_rule() for row in MaskRule.objects.all()]
    return masking.Masker(rules, topic, settings.SECRET_KEY.encode())


def mask_rules_list() -> list[MaskRule]:
    return list(MaskRule.objects.select_related("created_by"))


def mask_rule_add(*, sink: AuditSink, actor: Actor, topic: str, path: str, action: str) -> MaskRule:
    """Keep one masking rule (BadBinding with the reason when a field is wrong), audited."""
    rule = masking.check_rule(topic, path, action)
    try:
        with transaction.atomic():
            row = MaskRule.objects.create(
                topic=rule.topic, path=rule.path, action=rule.action, created_by=actor.user
            )
    except IntegrityError:
        raise g.BadBinding(f"{rule.path} of topics {rule.topic} is masked already") from None
    actor.record(sink, "access.mask", f"topics {row.topic}", after=_masked(row))
    return row


def mask_rule_remove(*, sink: AuditSink, actor: Actor, pk: int) -> MaskRule:
    row = MaskRule.objects.get(pk=pk)
    before = _masked(row)
    row.delete()
    actor.record(sink, "access.mask_remove", f"topics {row.topic}", before=before)
    return row


def _masked(row: MaskRule) -> dict:
    return {"topic": row.topic, "path": row.path, "action": row.action}
