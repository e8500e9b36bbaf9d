"""Every consumer group a client can create is reachable: from the group list's link to the
group page, its reset page and a reset preview, and through the API (describe, reset, delete),
whatever its id holds (``/``, ``..``, ``~``, ``%``, control characters, the empty id). One URL
scheme for group ids serves them all (brokerui/group_paths.py)."""

from __future__ import annotations

import html
import re
from urllib.parse import quote

import pytest
from django.urls import resolve, reverse
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from brokerui.console.templatetags.tidelog_format import group_label
from brokerui.group_paths import decode_group_id, encode_group_id

ODD_IDS = [
    "a/b",
    "..",
    ".",
    "...",
    "x/reset",
    "x/delete",
    "/",
    "//",
    "../../etc/passwd",
    "~",
    "~2F",
    "50%",
    "%2e%2e",
    "%2F",
    "a?b#c",
    "sp ace",
    " lead",
    "tab\there",
    "new\nline",
    "cr\rlf",
    "nul\x00",
    "\x7f",
    "ü/ñ",
    "\\evil",
    "<b>x</b>",
    "\u2028",
    "emoji 🚀",
    "a" * 300,
]
# Kafka group ids are strings of up to 32,767 UTF-8 bytes; any text a client can send
group_ids = st.text(max_size=60)


# ================================================================================ the scheme


@settings(max_examples=1000)
@given(group_id=group_ids)
@example(group_id="")
def test_every_group_id_is_one_segment_that_reads_back(group_id):
    segment = encode_group_id(group_id)
    assert segment and "/" not in segment and segment not in (".", "..")
    assert decode_group_id(segment) == group_id
    for name, args in [
        ("console:group", [group_id]),
        ("console:group_reset", [group_id]),
        ("console:group_reset_csv", [group_id]),
        ("console:group_delete", [group_id]),
        ("console:group_delete_offsets", [group_id]),
        ("api:group-detail", [group_id]),
        ("api:group-reset", [group_id]),
        ("api:group-delete-offsets", [group_id, "orders"]),
    ]:
        url = reverse(name, args=args)
        match = resolve(_path_info(url))
        assert match.view_name == name and match.kwargs["group_id"] == group_id, url


def _path_info(url: str) -> str:
    """What a server hands Django for `url`: the path, percent-decoded."""
    from urllib.parse import unquote

    return unquote(url)


def test_plain_ids_keep_their_urls():
    assert reverse("console:group", args=["billing"]) == "/groups/billing/"
    assert reverse("api:group-detail", args=["orders.v2-x_y"]) == "/api/v1/groups/orders.v2-x_y"
    assert reverse("console:group", args=["a/b"]) == "/groups/a~2Fb/"
    assert reverse("console:group", args=[".."]) == "/groups/~2E~2E/"
    assert reverse("console:group", args=[""]) == "/groups/~/"


@pytest.mark.parametrize("segment", ["~zz", "~", "a~", "~8F"])
def test_a_malformed_segment_is_a_404(viewer_client, broker, segment):
    if segment == "~":  # the empty id: a group that does not exist
        assert viewer_client.get(f"/groups/{segment}/").status_code == 404
        return
    assert viewer_client.get(f"/groups/{quote(segment)}/").status_code == 404


# ================================================================================ the pages


@pytest.fixture
def orders(broker):
    broker.store.create_topic("orders", partitions=2)
    for i in range(4):
        broker.store.append("orders", b"v%d" % i, partition=i % 2)
    return broker


@pytest.fixture
def api(operator, broker):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=operator).key}")
    return client


def _get(client, url, **kwargs):
    response = client.get(url, **kwargs)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def _reach(client, api, broker, group_id: str) -> None:
    """List → group page → reset page → preview, then the API, for one group."""
    label = html.escape(group_label(group_id))
    listing = _get(client, reverse("console:groups"), data={"q": group_id})
    links = dict(
        (html.unescape(text), html.unescape(href))
        for href, text in re.findall(r'<td class="grp-id"><a href="([^"]+)">([^<]*)</a>', listing)
    )
    assert group_label(group_id) in links, (group_id, links)

    page = _get(client, links[group_label(group_id)])
    assert f'<h1 class="grp-title">{label}</h1>' in page
    reset_href = html.unescape(re.search(r'href="([^"]+)" id="reset-link"', page)[1])

    reset = _get(client, reset_href)
    assert f"<strong>{label}</strong>" in reset
    form = re.search(r'<form id="reset-form"[^>]*>', reset)[0]
    action = html.unescape(re.search(r'\baction="([^"]+)"', form)[1])
    preview = client.post(
        action,
        {"action": "preview", "scope": "all", "strategy": "to-earliest"},
        HTTP_HX_REQUEST="true",
    )
    assert preview.status_code == 200 and 'class="grp-preview"' in preview.content.decode()

    path = "/api/v1/groups/" + quote(encode_group_id(group_id), safe="~")
    described = api.get(path)
    assert described.status_code == 200 and described.json()["group_id"] == group_id
    reset_api = api.post(
        path + "/reset", {"strategy": "to-earliest", "scope": "all_topics"}, format="json"
    )
    assert reset_api.status_code == 200, reset_api.content
    assert reset_api.json()["group_id"] == group_id
    assert api.delete(path).status_code == 204
    assert group_id not in dict(broker.coordinator.list_groups())


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(group_id=group_ids)
@example(group_id="")
def test_any_group_id_is_reachable_from_the_list_and_the_api(
    operator_client, api, orders, group_id
):
    orders.coordinator.commit_offsets(group_id, {("orders", 0): 1, ("orders", 1): 2})
    _reach(operator_client, api, orders, group_id)


@pytest.mark.parametrize("group_id", ODD_IDS, ids=repr)
def test_odd_group_ids_are_reachable(operator_client, api, orders, group_id):
    orders.coordinator.commit_offsets(group_id, {("orders", 0): 1})
    _reach(operator_client, api, orders, group_id)


def test_groups_a_kafka_client_creates_are_reachable(settings, tmp_path, operator):
    """Offsets committed by kafka-python over the Kafka port, under odd group ids."""
    from django.test import Client
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    from brokerui.broker import close_broker, get_broker

    close_broker()
    settings.TIDELOG_DATA_DIR = tmp_path / "data"
    settings.TIDELOG_DEMO = False
    settings.TIDELOG_KAFKA_LISTENER = True
    settings.TIDELOG_KAFKA_PORT = 0
    try:
        broker = get_broker()
        broker.store.create_topic("orders", partitions=2)
        host, port = broker.kafka_address
        client_ids = ["a/b", "..", "x/reset", "~", "new\nline", "nul\x00", "ü/ñ", "%2e%2e"]
        for group_id in client_ids:
            consumer = KafkaConsumer(
                bootstrap_servers=f"{host}:{port}", group_id=group_id, enable_auto_commit=False
            )
            try:
                consumer.commit({TopicPartition("orders", 0): OffsetAndMetadata(0, "", -1)})
            finally:
                consumer.close()
        assert set(client_ids) <= {g for g, _ in broker.coordinator.list_groups()}
        client = Client()
        client.force_login(operator)
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=operator).key}")
        for group_id in client_ids:
            _reach(client, api, broker, group_id)
    finally:
        close_broker()
