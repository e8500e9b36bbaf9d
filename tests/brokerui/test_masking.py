"""Field masking (brokerui.access.masking): the same record read through every path a user has
into records — the message browser (in each display mode), the record page, an export, the
JSON API and a saved search's matches — as a user without the unmask permission finds no
clear value; one with it does; a filter on a masked field is refused; the rules are managed
on the Access page, audited."""

from __future__ import annotations

import base64
import json
import time

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from rest_framework.test import APIClient

from brokerui.access.grants import BadBinding
from brokerui.access.masking import MASKED, Masker, MaskRule, check_rule
from brokerui.access.models import MaskRule as MaskRuleRow
from brokerui.audit.models import AuditEntry
from brokerui.console.search.services import close_saved_searches
from streams.log.records import Record

CARD = "4111111111111111"
TOKEN = "Bearer secret-token-42"
EVENT = {"status": "error", "card": {"number": CARD, "holder": "Ann"}, "amount": 5}


def test_paths_walk_objects_and_lists_and_unreadable_parts_are_masked_whole():
    rules = [
        MaskRule("pay*", "value.items.card.number"),
        MaskRule("pay*", "headers.authorization", "hash"),
    ]
    masker = Masker(rules, "payments", b"k")
    value = {"items": [{"card": {"number": "1"}}, {"card": {"number": "2"}}, {"x": 1}]}
    rec = Record(0, 0, b"k1", json.dumps(value).encode(), (("authorization", b"t"), ("h", b"v")))
    shown = masker.record(rec, None, None)
    assert json.loads(shown.value) == {
        "items": [{"card": {"number": MASKED}}, {"card": {"number": MASKED}}, {"x": 1}]
    }
    assert shown.key == b"k1"  # no rule on the key
    (name, hashed), other = shown.headers
    assert name == "authorization" and hashed.startswith(b"hmac:") and hashed != b"t"
    assert masker.record(rec, None, None).headers[0][1] == hashed  # stable: equal looks equal
    assert other == ("h", b"v")
    binary = masker.record(rec._replace(value=b"\x00\xff not json"), None, None)
    assert json.loads(binary.value) == MASKED  # could not look inside: all of it hidden
    assert not Masker(rules, "orders")  # the pattern does not match: nothing to do


def test_a_search_match_is_masked_on_a_copy_and_whole_parts_and_hashes_stay_stable():
    masker = Masker([MaskRule("*", "value.card.number", "hash")], "payments", b"k")
    event = json.loads(json.dumps(EVENT))
    shown = masker.event(event)
    assert event == EVENT  # the job's own match is left as it was
    assert shown["card"]["number"].startswith("hmac:") and shown["card"]["holder"] == "Ann"
    again = masker.record(Record(0, 0, None, json.dumps(EVENT).encode()), None, None)
    assert json.loads(again.value)["card"]["number"] == shown["card"]["number"]
    other = Masker([MaskRule("*", "value.card.number", "hash")], "payments", b"another key")
    assert other.event(event)["card"]["number"] != shown["card"]["number"]  # keyed
    whole = Masker([MaskRule("*", "key"), MaskRule("*", "value.card")], "payments")
    rec = whole.record(Record(3, 9, b'{"id": 1}', json.dumps(EVENT).encode()), None, None)
    assert json.loads(rec.key) == MASKED and json.loads(rec.value)["card"] == MASKED
    assert (rec.offset, rec.timestamp_ms, rec.headers) == (3, 9, ())


@pytest.mark.parametrize(
    "path, reason",
    [("card.number", "starts with key, value or headers"), ("headers", "names one header"),
     ("value.a b", "is not a field name")],
)  # fmt: skip
def test_a_bad_rule_is_refused_with_the_reason(path, reason):
    with pytest.raises(BadBinding, match=reason):
        check_rule("payments", path, "mask")


@pytest.fixture
def payments(broker, db):
    broker.store.create_topic("payments", 1)
    broker.store.append(
        "payments", json.dumps(EVENT).encode(), b"k0", headers=(("authorization", TOKEN.encode()),)
    )
    MaskRuleRow.objects.create(topic="pay*", path="value.card.number", action="mask")
    MaskRuleRow.objects.create(topic="pay*", path="headers.authorization", action="hash")
    yield broker
    close_saved_searches()


@pytest.fixture
def auditor(db):
    """A viewer who may see masked fields in the clear (the unmask permission)."""
    user = User.objects.create_user("ada")
    user.user_permissions.add(Permission.objects.get(codename="unmask"))
    return user


def _clear(text: str) -> bool:
    b64 = base64.b64encode(json.dumps(EVENT).encode()).decode()
    return CARD in text or "secret-token-42" in text or b64 in text


def _paths(client, api) -> dict[str, str]:
    """The record through each path, as text."""
    out = {}
    for mode in ("auto", "text", "hex"):
        url = f"/topics/payments/messages/?seek=oldest&view={mode}"
        out[f"browser ({mode})"] = client.get(url).content.decode()
    out["record page"] = client.get("/topics/payments/messages/0/0/").content.decode()
    out["record page (hex)"] = client.get(
        "/topics/payments/messages/0/0/?view=hex"
    ).content.decode()
    export = client.get("/topics/payments/export/?seek=oldest&format=jsonl")
    out["export"] = b"".join(export.streaming_content).decode()
    out["API"] = api.get("/api/v1/topics/payments/records?partition=0").content.decode()
    return out


def test_a_masked_user_finds_no_clear_value_on_any_path(client, viewer, auditor, payments):
    client.force_login(viewer)
    api = APIClient()
    api.force_authenticate(viewer)
    seen = _paths(client, api)
    for path, text in seen.items():
        assert not _clear(text), f"a clear value through the {path}"
        assert "Ann" in text or "416e6e" in text.replace(" ", ""), path  # the rest is shown
    assert MASKED in seen["browser (auto)"] and "hmac:" in seen["record page"]
    api_record = json.loads(seen["API"])["records"][0]
    assert json.loads(api_record["value"]["text"])["card"]["number"] == MASKED

    client.force_login(auditor)
    api.force_authenticate(auditor)
    clear = _paths(client, api)
    assert CARD in clear["browser (auto)"] and CARD in clear["export"]
    assert "secret-token-42" in clear["record page"]


def test_a_filter_on_a_masked_field_is_refused(client, viewer, payments):
    client.force_login(viewer)
    guess = client.get(
        "/topics/payments/messages/", {"seek": "oldest", "q": f'value.card.number == "{CARD}"'}
    )
    assert guess.status_code == 400
    assert "The field number is masked for you" in guess.content.decode()
    raw = client.get(
        "/topics/payments/messages/",
        {"seek": "oldest", "field": "value", "op": "contains", "text": "4111"},
    )
    assert raw.status_code == 400
    export = client.get(
        "/topics/payments/export/",
        {"seek": "oldest", "format": "jsonl", "field": "value", "op": "contains", "text": "4111"},
    )
    assert export.status_code == 400
    fine = client.get(
        "/topics/payments/messages/", {"seek": "oldest", "q": 'value.status == "error"'}
    )
    assert fine.status_code == 200


def test_saved_search_matches_are_masked(client, operator, viewer, payments):
    client.force_login(operator)
    form = {"name": "Errors", "topic": "payments", "query": "status:error"}
    qid = client.post(reverse("console:searches"), form).url.rstrip("/").rsplit("/", 1)[-1]
    payments.store.append("payments", json.dumps(EVENT).encode(), b"k1")
    client.force_login(viewer)
    deadline, page = time.monotonic() + 30, ""
    while time.monotonic() < deadline and 'data-offset="' not in page:
        page = client.get(reverse("console:search", args=[qid])).content.decode()
        time.sleep(0.2)
    assert 'data-offset="' in page, page
    assert CARD not in page and MASKED in page and "Ann" in page
    assert operator.is_superuser is False  # an operator without unmask sees it masked too
    client.force_login(operator)
    assert CARD not in client.get(reverse("console:search", args=[qid])).content.decode()


def test_rules_are_managed_on_the_access_page_audited(client, operator, broker):
    admin = User.objects.create_superuser("root", password="x-root-pass-1")
    client.force_login(admin)
    added = client.post(
        "/access/masking/", {"topic": "orders", "path": "value.email", "action": "hash"}
    )
    assert added.status_code == 302
    row = MaskRuleRow.objects.get(topic="orders")
    bad = client.post("/access/masking/", {"topic": "orders", "path": "email", "action": "mask"})
    assert bad.status_code == 400 and "starts with key, value or headers" in bad.content.decode()
    assert 'value="email"' in bad.content.decode()
    assert client.get(f"/access/masking/{row.pk}/remove/").status_code == 200
    assert client.post(f"/access/masking/{row.pk}/remove/", {"confirm": "yes"}).status_code == 302
    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions[-2:] == ["access.mask", "access.mask_remove"]
    client.force_login(operator)  # operator of every cluster: manages rules too
    assert (
        client.post(
            "/access/masking/", {"topic": "x", "path": "value", "action": "mask"}
        ).status_code
        == 302
    )
