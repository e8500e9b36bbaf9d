"""The live WebSocket endpoints: one consumer per concern.

- `MetricsConsumer` (``/ws/metrics/``): a page subscribes to the series of its scope over a
  range (``{"type": "subscribe", "scope": "topic", "name": "orders", "range_ms": 900000,
  "since": <ms>}``), gets the history since then (``backfill``, from ``__metrics``), then each
  window as it changes (``points``), at the range's resolution (`streams.broker.metrics.
  downsample`: 10-second windows for 15 minutes, …; an open window is sent again as it grows).
- `PanelConsumer` (``/ws/panels/<id>/``): a user's own panel; a snapshot, then each update.
- `SearchConsumer` (``/ws/searches/<id>/``): a saved search's matches; a snapshot, then each
  new batch.

All refuse anonymous connections (and a panel that is not the user's), and all obey
``{"type": "pause"}`` (a hidden tab: the socket leaves its group, nothing more is sent) and
``{"type": "resume", "since": <ms>}`` (rejoin, then fill the gap). Channel-layer events are
handled by methods named after their type (``metrics.points`` → `metrics_points`).

Flow control: each live message carries a ``seq``, and the page acknowledges every
``ack_every``-th (``{"type": "ack", "seq": n}``: that one and all before it). A page
`MAX_IN_FLIGHT` messages behind — a slow or stopped client — is sent nothing more and
nothing is kept for it (the server never buffers without bound: what was sent and not read
is at most that many messages); when it acknowledges again it gets the newest state at once
(the gap filled, as after a resume), not each update it missed.

Each consumer instance lives on the event loop; the hub and jobs are read in worker threads.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from brokerui.access import services as access
from brokerui.access.grants import GROUP, TOPIC
from brokerui.console import roles
from brokerui.console.live import feeds, relay
from brokerui.console.live.scopes import KINDS, NO_JOBS, JobTopics, Scope, matcher
from streams.broker.metrics.downsample import ChartFeed, plan_for
from streams.errors import TidelogError

REFUSED = 4403  # close code for anonymous or foreign sockets
# live messages a page may have unacknowledged; one this far behind (a slow client, a stopped
# one) gets nothing more until it acknowledges, and then the newest state (`fill_gap`)
MAX_IN_FLIGHT = 50
ACK_EVERY = 10  # the page acknowledges every tenth message (and so all before it)
# the live events that come through the channel layer (chart windows do not: `feeds.PointsSink`)
LIVE_EVENTS = frozenset({feeds.PANEL_EVENT, feeds.SEARCH_EVENT})


def now_ms() -> int:
    return int(time.time() * 1000)


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """What both endpoints share: authentication, one group at a time, pause and resume."""

    relay_key = ""
    group: str | None = None
    paused = False
    _relay: relay.Relay | None = None
    sent = 0  # the seq of the last live message sent
    acked = 0  # the highest seq the page acknowledged
    behind = False  # MAX_IN_FLIGHT unacknowledged: nothing is sent until it catches up

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not await self.allowed(user):
            await self.close(code=REFUSED)
            return
        await self.accept()

    async def allowed(self, user) -> bool:
        """Whether `user` may open this socket at all: a role somewhere (brokerui.access)."""
        return await database_sync_to_async(roles.may_read)(user, [])

    async def refused(self, kind: str, name: str) -> bool:
        """Send a refusal and say so when the user may not read `kind` `name`."""
        user = self.scope["user"]
        if await database_sync_to_async(roles.may_read)(user, [(kind, name)]):
            return False
        why = await database_sync_to_async(roles.refusal_text)(user, [(kind, name)], "viewer")
        await self.send_json({"type": "refused", "message": why})
        return True

    async def disconnect(self, code: int) -> None:
        await self.leave()
        if self._relay is not None:
            relay.release(self.relay_key, self._relay)
            self._relay = None

    async def receive_json(self, content, **kwargs) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        handler = {
            "subscribe": self.on_subscribe,
            "pause": self.on_pause,
            "resume": self.on_resume,
            "ack": self.on_ack,
        }.get(kind)
        if handler is None:
            await self.send_json({"type": "error", "message": f"unknown message type {kind!r}"})
            return
        await handler(content)

    async def join(self, group: str) -> None:
        await self.leave()
        self.group = group
        await self.channel_layer.group_add(group, self.channel_name)

    async def leave(self) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def on_pause(self, content: dict) -> None:
        # leaving the group stops the layer delivering to this socket at all
        self.paused = True
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        await self.send_json({"type": "paused"})

    async def on_resume(self, content: dict) -> None:
        if not self.paused:
            return
        self.paused = False
        if self.group is not None:
            # rejoin before reading the history: a window may come twice, never be missed
            await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_json({"type": "resumed"})
        await self.fill_gap(content)

    async def send_live(self, message: dict | str) -> None:
        """Send one live message (a dict, or a JSON object's text encoded once for many
        sockets) with its seq, unless the page is `MAX_IN_FLIGHT` behind."""
        if self.behind:
            return
        if self.sent - self.acked >= MAX_IN_FLIGHT:
            self.behind = True  # dropped: `on_ack` sends the newest state instead
            return
        self.sent += 1
        body = message if isinstance(message, str) else json.dumps(message)
        # the seq spliced into the object's text: `body` is '{...}', never '{}'
        await self.send(text_data=f'{{"seq":{self.sent},"ack_every":{ACK_EVERY},{body[1:]}')

    async def dispatch(self, message: dict) -> None:
        # the live events' handlers touch no database: skip Channels' closing of old
        # connections (a hop to a worker thread) that precedes every handler call, on the loop
        # the broker shares (when chart windows still came this way, 200 hops a second with 20
        # dashboards)
        if message.get("type") in LIVE_EVENTS:
            await getattr(self, get_handler_name(message))(message)
            return
        await super().dispatch(message)

    async def on_ack(self, content: dict) -> None:
        seq = _int(content.get("seq"))
        if seq is None or not 0 < seq <= self.sent:
            await self.send_json({"type": "error", "message": "ack of no message sent"})
            return
        self.acked = max(self.acked, seq)
        if self.behind and self.sent - self.acked < MAX_IN_FLIGHT // 2:
            self.behind = False
            await self.fill_gap({})

    async def on_subscribe(self, content: dict) -> None:
        raise NotImplementedError

    async def fill_gap(self, content: dict) -> None:
        raise NotImplementedError


class MetricsConsumer(LiveConsumer):
    relay_key = "metrics"
    subject: Scope | None = None
    topics: list[str] = []  # a group scope: the topics its group reads
    range_ms: int | None = None
    stream: feeds.ChartStream | None = None  # the live windows, shared with its other sockets
    _held: list | None = None  # the stream's events while a backfill is read (`backfill`)
    last_t: int | None = None
    hub = None
    jobs: JobTopics = NO_JOBS

    async def on_subscribe(self, content: dict) -> None:
        scope = _scope(content)
        if scope is None or scope.kind == "panel":
            await self.send_json({"type": "error", "message": "unknown scope"})
            return
        if scope.kind in (TOPIC, GROUP) and await self.refused(scope.kind, scope.name):
            return
        self.hub = await asyncio.to_thread(feeds.metrics_hub)
        if self.hub is None:
            await self.send_json(
                {"type": "unavailable", "message": "This broker runs without a metrics sampler."}
            )
            return
        self.jobs = await asyncio.to_thread(feeds.job_topics)
        if self._relay is None:
            self._relay = relay.acquire(
                self.relay_key, self.hub, self.hub.subscribe, feeds.MetricsFanOut(self.jobs)
            )
        self.drop_stream()
        self.range_ms = _int(content.get("range_ms"))
        self.subject, self.last_t, self.paused = scope, None, False
        self.topics = await asyncio.to_thread(_group_topics, scope)
        self.stream = self._relay.deliver.attach(scope, plan_for(self.range_ms), self)
        await self.backfill(_int(content.get("since")))

    def drop_stream(self) -> None:
        if self.stream is not None and self._relay is not None:
            self._relay.deliver.detach(self.stream, self)
        self.stream = None
        self._held = None

    async def disconnect(self, code: int) -> None:
        self.drop_stream()
        await super().disconnect(code)

    async def fill_gap(self, content: dict) -> None:
        if self.subject is None:
            return
        since = _int(content.get("since"))
        await self.backfill(since if since is not None else self.last_t)

    async def backfill(self, since_ms: int | None) -> None:
        """The history since `since_ms` (None: the whole range) at the chart's resolution,
        read into a chart of its own. The first socket of an unseeded stream also seeds it:
        with a whole range read (its own, when it asked for the whole range)."""
        stream = self.stream
        seeding = not stream.seeded
        # the stream's windows that come while history is read wait behind the backfill, in
        # order (a final window may come twice, is never missed nor sent before it)
        self._held = []
        try:
            since, rows, chart = await self.read_history(since_ms)
            self.see(rows)
            await self.send_live(feeds.points_message("backfill", stream.plan, rows, since=since))
            while self._held:
                await self._send_points(self._held.pop(0))
        finally:
            self._held = None
        if self.stream is not stream:  # unsubscribed or resubscribed meanwhile
            return
        if seeding and not stream.seeded:
            if since_ms is not None:
                _since, _rows, chart = await self.read_history(None)
            await self._relay.deliver.seed(stream, chart)

    async def read_history(self, since_ms: int | None) -> tuple[int, list, ChartFeed]:
        """(start, rows, the chart they were read into: its live windows continue from them)"""
        from brokerui.console.live import services  # models: imported once apps are ready

        chart = ChartFeed(self.range_ms)
        since, rows = await asyncio.to_thread(
            services.metrics_backfill,
            hub=self.hub,
            chart=chart,
            match=matcher(self.subject, self.topics, self.jobs),
            now_ms=now_ms(),
            since_ms=since_ms,
        )
        return since, rows, chart

    async def metrics_points(self, event: dict) -> None:
        """`feeds.PointsSink`: a batch's changed windows, from the stream on this loop."""
        if self._held is not None:
            self._held.append(event)
            return
        await self._send_points(event)

    async def _send_points(self, event: dict) -> None:
        if self.paused or self.stream is None:
            return
        self.last_t = event["latest"] if self.last_t is None else max(self.last_t, event["latest"])
        await self.send_live(event["body"])

    def see(self, rows: list) -> None:
        if rows:
            latest = max(r[1] for r in rows)
            self.last_t = latest if self.last_t is None else max(self.last_t, latest)


class PanelConsumer(LiveConsumer):
    relay_key = "panels"
    jobs = None

    @property
    def panel_pk(self) -> int:
        return int(self.scope["url_route"]["kwargs"]["pk"])

    async def allowed(self, user) -> bool:
        from brokerui.console.live.models import MetricPanel

        self.panel = await database_sync_to_async(
            MetricPanel.objects.filter(pk=self.panel_pk, user=user).first
        )()
        if self.panel is None:
            return False
        topic = self.panel.spec.get("topic") or ""
        return await database_sync_to_async(roles.may_read)(user, [(TOPIC, topic)])

    async def on_subscribe(self, content: dict) -> None:
        self.jobs = await asyncio.to_thread(feeds.panel_jobs)
        if self.jobs is None:
            await self.send_json(
                {"type": "unavailable", "message": "This broker runs without panel jobs."}
            )
            return
        if self._relay is None:
            self._relay = relay.acquire(
                self.relay_key, self.jobs, self.jobs.subscribe, feeds.PanelFanOut()
            )
        self.paused = False
        await self.join(Scope("panel", self.panel.panel_id).group_name)
        await self.fill_gap(content)

    async def fill_gap(self, content: dict) -> None:
        if self.jobs is None:
            return
        from brokerui.console.live.services import panel_snapshot

        try:
            update = await asyncio.to_thread(panel_snapshot, self.panel)
        except TidelogError as exc:  # its topic is gone, or an external cluster does not answer
            await self.send_json(
                {"type": "unavailable", "message": f"This panel cannot run: {exc}"}
            )
            return
        await self.send_live({"type": "snapshot", "update": update})

    async def panel_update(self, event: dict) -> None:
        if not self.paused:
            await self.send_live({"type": "update", "update": event["update"]})


class SearchConsumer(LiveConsumer):
    """``/ws/searches/<id>/``: a saved search's newest matches (``snapshot``), then each new
    batch (``matches``) as the search jobs write them."""

    relay_key = "searches"
    searches = None
    masker = None  # the fields of the searched topic masked for this user

    @property
    def qid(self) -> str:
        return str(self.scope["url_route"]["kwargs"]["qid"])

    async def on_subscribe(self, content: dict) -> None:
        from brokerui.console.search import services

        self.searches = await asyncio.to_thread(services.saved_searches_source)
        if self.searches is None:
            await self.send_json(
                {"type": "unavailable", "message": "Saved searches need the built-in broker."}
            )
            return
        try:
            topic = (await asyncio.to_thread(self.searches.get, self.qid)).topic
        except TidelogError:
            topic = ""
        if topic and await self.refused(TOPIC, topic):
            return
        self.masker = await database_sync_to_async(access.masker_for)(self.scope["user"], topic)
        if self._relay is None:
            self._relay = relay.acquire(
                self.relay_key, self.searches, self.searches.subscribe, feeds.SearchFanOut()
            )
        self.paused = False
        await self.join(Scope("search", self.qid).group_name)
        await self.fill_gap(content)

    async def fill_gap(self, content: dict) -> None:
        if self.searches is None:
            return
        from brokerui.console.search import services

        rows = await asyncio.to_thread(
            services.saved_search_matches, searches=self.searches, qid=self.qid
        )
        await self.send_live({"type": "snapshot", "matches": services.masked(rows, self.masker)})

    async def search_matches(self, event: dict) -> None:
        if not self.paused:
            from brokerui.console.search.services import masked

            shown = masked(event["matches"], self.masker)
            await self.send_live({"type": "matches", "matches": shown})


# ------------------------------------------------------------------------------ parsing


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _scope(content: dict) -> Scope | None:
    kind, name = content.get("scope"), content.get("name") or ""
    unnamed = kind in ("overview", "jobs")
    if kind not in KINDS or not isinstance(name, str) or (not unnamed and not name):
        return None
    return Scope(kind, "" if unnamed else name)


def _group_topics(scope: Scope) -> list[str]:
    """The topics a group reads (their produce rate is drawn on its page)."""
    if scope.kind != "group":
        return []
    from brokerui.cluster import get_cluster
    from streams.errors import UnknownGroup

    try:
        detail = get_cluster().describe_group(scope.name)
    except UnknownGroup:
        return []
    return sorted({p.topic for p in detail.lag.partitions})


class ViewConsumer(LiveConsumer):
    """``/ws/views/``: a job's table as Materialize's ``SUBSCRIBE`` gives it. Subscribe with
    ``{"type": "subscribe", "name": "<job>/<view>"}``; then ``snapshot`` (every row at a
    time T), ``changes`` (``[time, diff, key, row]``: an update is -1 old row, +1 new row) and
    ``progress`` marks (complete below that time; the input offsets and watermark it
    reflects). Pause leaves the stream; resume sends a fresh snapshot. The relay listens to
    the view (``View.listen``) before the snapshot is taken, so no change falls between; those
    older than the snapshot are dropped (``services.stream_messages``)."""

    view = None
    since = 0
    masked_topics: frozenset[str] | set[str] = frozenset()
    maskers: list = []

    async def on_subscribe(self, content: dict) -> None:
        from brokerui.console.jobviews import services

        name = content.get("name")
        job, _, view_name = name.partition("/") if isinstance(name, str) else ("", "", "")
        if not job or not view_name:
            await self.send_json({"type": "error", "message": "name must be <job>/<view>"})
            return
        try:
            source = await asyncio.to_thread(services.view_source)
            view = await asyncio.to_thread(
                services.view_stream, source=source, job=job, view=view_name
            )
        except TidelogError as exc:
            await self.send_json({"type": "unavailable", "message": str(exc)})
            return
        if self._relay is not None:
            relay.release(self.relay_key, self._relay)
        self.relay_key = f"views:{job}/{view_name}"
        group = services.view_group(job, view_name)
        self._relay = relay.acquire(self.relay_key, view, view.listen, services.ViewFanOut(group))
        self.view, self.paused = view, False
        await self.join(group)
        await self.fill_gap(content)

    async def fill_gap(self, content: dict) -> None:
        if self.view is None:
            return
        from brokerui.console.jobviews import services

        snap = await asyncio.to_thread(self.view.snapshot)
        self.since = snap.time
        await self._mask_for(snap.token.offsets)
        await self.send_live(services.mask_message(services.snapshot_message(snap), self.maskers))

    async def view_changes(self, event: dict) -> None:
        if self.paused:
            return
        from brokerui.console.jobviews import services

        if event.get("consistency"):
            await self._mask_for(event["consistency"]["offsets"])
        for message in services.stream_messages(event, self.since):
            await self.send_live(services.mask_message(message, self.maskers))

    async def _mask_for(self, topics) -> None:
        """Know this user's masking of the view's input `topics` (its rows are masked as
        their records are: brokerui.access.masking)."""
        topics = set(topics)
        if topics <= self.masked_topics:
            return
        from brokerui.console.jobviews import services

        self.masked_topics = self.masked_topics | topics
        mine = functools.partial(access.masker_for, self.scope["user"])
        self.maskers = await database_sync_to_async(services.view_maskers)(mine, self.masked_topics)


class TailConsumer(LiveConsumer):
    """``/ws/tail/``: tells a message browser's live tail when to fetch. Send ``{"type":
    "subscribe", "topic", "after": <the tail's cursor>, "cluster"?}``; once the topic has
    records past it, the socket sends ``{"type": "ready", "after"}`` and the page fetches
    them (``console:messages_tail``: filters, masking and display as the page's), then
    subscribes again with the new cursor. One notice at a time: a page that stops asking
    (paused, or too slow to keep up) is sent nothing more, and nothing is kept for it."""

    task: asyncio.Task | None = None
    WAIT_S = 30.0

    async def on_subscribe(self, content: dict) -> None:
        from brokerui.cluster import get_cluster, using
        from brokerui.console.messages import services

        topic, after = content.get("topic"), content.get("after")
        if not isinstance(topic, str) or not isinstance(after, str):
            await self.send_json({"type": "error", "message": "topic and after are required"})
            return
        name = content.get("cluster") if isinstance(content.get("cluster"), str) else None
        with using(name):  # the viewer role on the topic of that cluster
            if await self.refused(TOPIC, topic):
                return
        self._stop_waiting()
        self.paused = False

        async def wait() -> None:
            try:
                with using(name):
                    cluster = await asyncio.to_thread(get_cluster)
                    while not await services.tail_wait(
                        cluster=cluster, topic=topic, after=after, timeout_s=self.WAIT_S
                    ):
                        pass
                await self.send_json({"type": "ready", "after": after})
            except TidelogError as exc:
                await self.send_json({"type": "unavailable", "message": str(exc)})

        self.task = asyncio.create_task(wait())

    async def on_pause(self, content: dict) -> None:
        self._stop_waiting()
        self.paused = True
        await self.send_json({"type": "paused"})

    async def on_resume(self, content: dict) -> None:
        self.paused = False  # the page subscribes again with its cursor
        await self.send_json({"type": "resumed"})

    async def disconnect(self, code: int) -> None:
        self._stop_waiting()
        await super().disconnect(code)

    def _stop_waiting(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None
