"""Topic pages: list, detail, create, edit config, add partitions, purge, delete.

Views are thin: they parse input (forms.py), call the Cluster interface, audit what changed and
render. Engine refusals (bad names, configs, partition counts, compacted purges) come back as a
message next to the field that caused them, with what the user typed kept; an unknown topic is a
404 page, a viewer's attempt to change something a 403.
"""

from __future__ import annotations

import functools

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from brokerui.access.grants import TOPIC
from brokerui.access.services import visible_items
from brokerui.audit.services import Actor, process_sink
from brokerui.cluster import get_cluster
from brokerui.console.roles import (
    OPERATOR_MESSAGE,
    may_operate_somewhere,
    operator_required,
    require_operator,
)
from brokerui.console.schemas.mappings import mapped_parts
from brokerui.console.topics import forms as topic_forms
from brokerui.console.topics import services
from brokerui.console.topics.stats import (
    RATE_WINDOW_MS,
    TopicRow,
    config_rows,
    now_ms,
    partition_window_counts,
    rate_text,
    snapshot_as_of,
    sort_topics,
    topic_rate,
)
from brokerui.console.transactions.services import stable_offsets_read
from brokerui.schemas import mapping_book
from streams.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidRecord,
    InvalidTopicName,
    TidelogError,
    TopicAlreadyExists,
    UnknownPartition,
    UnknownTopic,
)

PAGE_SIZE = 50
SORT_COLUMNS = [  # (sort key, header, css class); the In /s column follows Size
    ("name", "Topic", ""),
    ("partitions", "Partitions", "num"),
    ("records", "Records", "num"),
    ("size", "Size", "num"),
    ("last_write", "Last write", ""),
]


def _partial(request) -> bool:
    """An htmx request that wants a fragment (not a history restore, which needs the page)."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def topic_view(view):
    """Render the 'no such topic' page (404) when the topic is unknown or vanished meanwhile."""

    @functools.wraps(view)
    def wrapper(request, name, *args, **kwargs):
        try:
            return view(request, name, *args, **kwargs)
        except UnknownTopic:
            return render(
                request,
                "console/topics/missing.html",
                {"nav": "topics", "name": name},
                status=404,
            )

    return wrapper


def _refuse_internal(request, d):
    return render(
        request, "console/topics/internal.html", {"nav": "topics", "topic": d}, status=403
    )


def _target(name: str) -> str:
    return f"topic {name}"


# ====================================================================== read


def topic_list(request):
    show_internal = request.GET.get("internal") == "1"
    name_filter = request.GET.get("q", "")[:300]
    cluster = get_cluster()
    topics = cluster.list_topics(include_internal=show_internal, name_filter=name_filter)
    topics = visible_items(request.user, TOPIC, topics)
    topics, sort = sort_topics(topics, request.GET.get("sort", "name"))
    page = Paginator(topics, PAGE_SIZE).get_page(request.GET.get("page"))
    now = now_ms()
    rows = [TopicRow(t, _rate_or_zero(cluster, t, now)) for t in page.object_list]
    context = {
        "nav": "topics",
        "page": page,
        "rows": rows,
        "q": name_filter,
        "show_internal": show_internal,
        "sort": sort,
        "rate_window_s": RATE_WINDOW_MS // 1000,
        "sort_columns": SORT_COLUMNS,
        "now_ms": now,
        "snapshot_ms": snapshot_as_of(topics),
    }
    if _partial(request):
        return render(request, "console/topics/partials/table.html", context)
    return render(request, "console/topics/list.html", context)


def _rate_or_zero(cluster, summary, now) -> float:
    try:
        return topic_rate(cluster, summary, now)
    except UnknownTopic:  # deleted between the list and now
        return 0.0


@topic_view
def topic_detail(request, name):
    cluster = get_cluster()
    d = cluster.describe_topic(name)
    now = now_ms()
    window = partition_window_counts(cluster, d, now)
    seconds = RATE_WINDOW_MS / 1000
    stable = stable_offsets_read(cluster=cluster, topic=name)  # None: the cluster cannot tell
    partitions = [
        (
            p,
            rate_text(window[p.partition] / seconds),
            None if stable is None or p.partition >= len(stable) else stable[p.partition],
        )
        for p in d.partitions
    ]
    groups = sorted(cluster.topic_groups(name), key=lambda g: (-g[2], g[0]))
    last = [p.last_append_ms for p in d.partitions if p.last_append_ms is not None]
    damaged = [(p.partition, r) for p in d.partitions for r in p.damaged]
    context = {
        "nav": "topics",
        "topic": d,
        "damaged": damaged,
        "damaged_partitions": len({partition for partition, _ in damaged}),
        "partitions": partitions,
        "stable_known": stable is not None,
        "rate": rate_text(sum(window.values()) / seconds),
        "rate_window_s": int(seconds),
        "last_append_ms": max(last, default=None),
        "segments": sum(p.segment_count for p in d.partitions),
        "groups": groups,
        "group_lag": sum(g[2] for g in groups),
        "config": config_rows(d),
        "overrides": len(d.overrides),
        "compact_only": d.config.get("cleanup.policy") == "compact",
        "compacted": "compact" in d.config.get("cleanup.policy", ""),
        "retention_ms": d.config.get("retention.ms"),
        "cleanup_policy": d.config.get("cleanup.policy"),
        "mapped_parts": mapped_parts(book=mapping_book(), topic=name),
    }
    return render(request, "console/topics/detail.html", context)


# ====================================================================== create


@require_http_methods(["GET", "POST"])
def topic_create(request):
    """Open to anyone who is operator somewhere: the role is checked on the new name."""
    if not may_operate_somewhere(request.user):
        raise PermissionDenied(OPERATOR_MESSAGE)
    cluster = get_cluster()
    if request.method == "GET":
        form = topic_forms.TopicCreateForm()
        return render(request, "console/topics/create.html", _create_context(form))

    existing = {t.name for t in cluster.list_topics(include_internal=True)}
    form = topic_forms.TopicCreateForm(request.POST, existing=existing)
    check = request.POST.get("_check")
    if check:  # htmx: validate as the user types, answer for one field
        form.is_valid()
        return render(
            request, "console/topics/partials/field_check.html", _field_check(form, check)
        )
    if form.is_valid():
        name = form.cleaned_data["name"]
        require_operator(request.user, TOPIC, name)
        partitions = form.cleaned_data["partitions"]
        try:
            d = services.topic_create(
                cluster=cluster,
                sink=process_sink(),
                actor=Actor(request.user),
                name=name,
                partitions=partitions,
                config=form.config,
            )
        except (InvalidTopicName, TopicAlreadyExists) as e:
            form.add_error("name", str(e))
        except InvalidPartitions as e:
            form.add_error("partitions", str(e))
        except InvalidConfig as e:
            field = next((f for f, k in topic_forms.CONFIG_FIELDS.items() if k == e.key), "configs")
            form.add_error(field, str(e))
        except TidelogError as e:
            form.add_error(None, str(e))
        else:
            messages.success(
                request,
                f"Created topic {name} with {len(d.partitions)} "
                f"partition{'s' if len(d.partitions) != 1 else ''}.",
            )
            return redirect("console:topic", name)
    return render(request, "console/topics/create.html", _create_context(form))


def _create_context(form) -> dict:
    from streams.log.config import SCHEMA

    return {
        "nav": "topics",
        "form": form,
        "help": topic_forms.CREATE_HELP,
        "schema": [(k, v[0], v[2]) for k, v in SCHEMA.items()],
    }


def _field_check(form, field: str) -> dict:
    if field not in form.fields:
        field = "name"
    errors = form.errors.get(field, [])
    ok = ""
    if not errors and field == "name" and form.cleaned_data.get("name"):
        ok = f"✓ {form.cleaned_data['name']} is a valid name, not taken yet"
    return {
        "msg_id": f"{field}-msg",
        "errors": errors,
        "ok": ok,
        "help": topic_forms.CREATE_HELP.get(field, ""),
    }


# ====================================================================== config


@operator_required
@require_http_methods(["GET", "POST"])
@topic_view
def topic_config(request, name):
    cluster = get_cluster()
    d = cluster.describe_topic(name)
    if d.internal:
        return _refuse_internal(request, d)
    if request.method == "GET":
        values = dict(d.overrides)
        return render(request, "console/topics/config.html", _config_context(d, values, {}))

    edit = topic_forms.config_edit(d, request.POST)
    check = request.POST.get("_check")
    if check:  # htmx: one key's verdict
        return render(
            request,
            "console/topics/partials/field_check.html",
            {
                "msg_id": config_msg_id(check),
                "errors": [edit.errors[check]] if check in edit.errors else [],
                "help": _config_help(d, check),
                "ok": "",
            },
        )
    if edit.errors:
        return render(
            request, "console/topics/config.html", _config_context(d, edit.values, edit.errors)
        )
    if not edit.changed:
        messages.info(request, "Nothing changed.")
        return redirect("console:topic", name)
    try:
        services.topic_config_update(
            cluster=cluster,
            sink=process_sink(),
            actor=Actor(request.user),
            name=name,
            set_=edit.set_,
            delete=edit.delete,
        )
    except InvalidConfig as e:
        errors = {e.key: str(e)} if e.key in d.config else {"__all__": str(e)}
        return render(
            request, "console/topics/config.html", _config_context(d, edit.values, errors)
        )
    changes = [f"{k}={v}" for k, v in edit.set_.items()] + [f"{k} reset" for k in edit.delete]
    messages.success(request, f"Updated the config of {name}: {', '.join(changes)}.")
    return redirect("console:topic", name)


def config_msg_id(key: str) -> str:
    return "cfg-" + "".join(c if c.isalnum() else "-" for c in key)[:80] + "-msg"


def _config_help(d, key: str) -> str:
    row = next((r for r in config_rows(d) if r.key == key), None)
    if row is None:
        return ""
    if row.overridden:
        return f"default {row.default_human}: empty the box or tick reset to go back to it"
    return ""


def _config_context(d, values: dict, errors: dict) -> dict:
    rows = [
        {
            "row": row,
            "value": values.get(row.key, ""),
            "errors": [errors[row.key]] if row.key in errors else [],
            "msg_id": config_msg_id(row.key),
            "help": _config_help(d, row.key),
        }
        for row in config_rows(d)
    ]
    return {
        "nav": "topics",
        "topic": d,
        "rows": rows,
        "form_error": errors.get("__all__", ""),
        "has_errors": bool(errors),
    }


# ====================================================================== partitions


@operator_required
@require_http_methods(["GET", "POST"])
@topic_view
def topic_partitions(request, name):
    cluster = get_cluster()
    d = cluster.describe_topic(name)
    if d.internal:
        return _refuse_internal(request, d)
    current = len(d.partitions)
    if request.method == "GET":
        form = topic_forms.AddPartitionsForm(initial={"total": current + 1})
        return render(request, "console/topics/partitions.html", _p_context(d, form))
    form = topic_forms.AddPartitionsForm(request.POST)
    if form.is_valid():
        total = form.cleaned_data["total"]
        try:
            after = services.topic_partitions_add(
                cluster=cluster,
                sink=process_sink(),
                actor=Actor(request.user),
                name=name,
                total=total,
            )
        except InvalidPartitions as e:
            form.add_error("total", str(e))
        else:
            messages.success(
                request, f"{name} now has {len(after.partitions)} partitions (was {current})."
            )
            return redirect("console:topic", name)
    return render(request, "console/topics/partitions.html", _p_context(d, form))


def _p_context(d, form) -> dict:
    return {"nav": "topics", "topic": d, "form": form, "current": len(d.partitions)}


# ====================================================================== delete


@operator_required
@require_http_methods(["GET", "POST"])
@topic_view
def topic_delete(request, name):
    cluster = get_cluster()
    d = cluster.describe_topic(name)
    if d.internal:
        return _refuse_internal(request, d)
    groups = cluster.topic_groups(name)
    data = request.POST if request.method == "POST" else None
    form = topic_forms.DeleteTopicForm(data, topic=name)
    if request.method == "POST" and form.is_valid():
        services.topic_delete(
            cluster=cluster, sink=process_sink(), actor=Actor(request.user), name=name
        )
        messages.success(request, f"Deleted topic {name} ({d.record_count:,} records).")
        return redirect("console:topics")
    return render(
        request,
        "console/topics/delete.html",
        {"nav": "topics", "topic": d, "form": form, "groups": groups},
    )


# ====================================================================== purge


@operator_required
@require_http_methods(["GET", "POST"])
@topic_view
def topic_purge(request, name):
    cluster = get_cluster()
    d = cluster.describe_topic(name)
    if d.internal:
        return _refuse_internal(request, d)
    if request.method == "GET":
        initial = {"partition": request.GET.get("partition", "all"), "mode": "offset"}
        form = topic_forms.PurgeForm(initial=initial, partitions=len(d.partitions))
        return render(request, "console/topics/purge.html", _purge_context(d, form))

    form = topic_forms.PurgeForm(request.POST, partitions=len(d.partitions))
    valid = form.is_valid()
    if request.POST.get("_preview"):  # htmx: what would go, before anything goes
        preview = _purge_preview(cluster, d, form) if valid else None
        return render(
            request,
            "console/topics/partials/purge_preview.html",
            {"form": form, "preview": preview, "topic": d},
        )
    if valid:
        args = form.purge_arguments()
        try:
            result = services.topic_purge(
                cluster=cluster,
                sink=process_sink(),
                actor=Actor(request.user),
                name=name,
                **args,
            )
        except (InvalidRecord, UnknownPartition) as e:
            form.add_error(None, str(e))
        else:
            deleted = result.records_deleted
            scope = (
                "all partitions"
                if args["partitions"] is None
                else (f"partition {args['partitions'][0]}")
            )
            messages.success(
                request,
                f"Purged {deleted:,} record{'s' if deleted != 1 else ''} from {name} ({scope}).",
            )
            return redirect("console:topic", name)
    return render(request, "console/topics/purge.html", _purge_context(d, form))


def _purge_preview(cluster, d, form) -> dict:
    """Per partition: current start, the start after the purge, records that would go."""
    args = form.purge_arguments()
    chosen = args["partitions"] if args["partitions"] is not None else range(len(d.partitions))
    rows = []
    for p in chosen:
        part = d.partitions[p]
        start, end = part.log_start_offset, part.end_offset
        if "before_offset" in args:
            target = min(max(args["before_offset"], start), end)
        elif "before_timestamp_ms" in args:
            found = cluster.offset_for_timestamp(
                topic=d.name, partition=p, timestamp_ms=args["before_timestamp_ms"]
            )
            target = end if found is None else max(found, start)
        else:
            target = end
        rows.append(
            {
                "partition": p,
                "start": start,
                "end": end,
                "target": target,
                "count": target - start,
                "left": end - target,
            }
        )
    return {"rows": rows, "total": sum(r["count"] for r in rows)}


def _purge_context(d, form) -> dict:
    return {
        "nav": "topics",
        "topic": d,
        "form": form,
        "compact_only": d.config.get("cleanup.policy") == "compact",
    }
