"""The dual-write race service and its page (Django test client; the race itself is real:
threads, SQLite files, a Tidelog log). The service shows divergence in the direct mode under a
forced interleaving, never in the log mode."""

from __future__ import annotations

import pytest
from django.urls import reverse

from brokerui.console.dualwrite import services
from streams.errors import InvalidConfig
from streams.eventsourcing.dualwrite import ForcedInterleaving

pytestmark = pytest.mark.django_db


def test_the_service_runs_both_modes_direct_diverges_log_converges(settings):
    settings.TIDELOG_DUALWRITE_POSTGRES = None
    run_id = services.dualwrite_start(keys=30, updates=300, interleaving=ForcedInterleaving())
    view = services.dualwrite_wait(run_id=run_id, timeout_s=120)
    assert view.state == "done", view.error
    assert view.through.mode == "log" and "TIDELOG_DUALWRITE_POSTGRES" in view.through.label
    direct, logged = view.results["direct"], view.results["through"]
    assert direct.keys == logged.keys > 0
    assert direct.divergent_keys == direct.keys  # every key, by the forced schedule
    assert logged.divergent_keys == 0
    assert (direct.writes, logged.writes) == (1_200, 600)
    assert view.progress.updates_done == view.progress.updates_total == 600


def test_a_second_run_is_refused_while_one_runs_and_bad_sizes_get_a_clear_error(settings):
    settings.TIDELOG_DUALWRITE_POSTGRES = None
    gate = ForcedInterleaving(timeout_s=60)
    first = services.dualwrite_start(keys=5, updates=2_000, interleaving=gate)
    try:
        with pytest.raises(services.RunBusy, match="under way"):
            services.dualwrite_start(keys=5, updates=10)
    finally:
        services.dualwrite_wait(run_id=first, timeout_s=120)
    with pytest.raises(InvalidConfig, match="keys"):
        services.dualwrite_start(keys=0, updates=10)


def test_a_viewer_sees_the_page_but_cannot_start_a_run(settings, viewer_client):
    settings.TIDELOG_DUALWRITE_POSTGRES = None
    page = viewer_client.get(reverse("console:dualwrite"))
    assert page.status_code == 200 and b"Operators start runs" in page.content
    assert b"Run both" not in page.content
    refused = viewer_client.post(reverse("console:dualwrite"), {"keys": "10", "updates": "50"})
    assert refused.status_code == 403


def test_the_page_starts_a_run_and_shows_its_results(settings, operator_client):
    settings.TIDELOG_DUALWRITE_POSTGRES = None
    page = operator_client.get(reverse("console:dualwrite"))
    assert page.status_code == 200 and b"Run both" in page.content
    bad = operator_client.post(reverse("console:dualwrite"), {"keys": "0", "updates": "10"})
    assert bad.status_code == 400 and b"greater than or equal to 1" in bad.content
    started = operator_client.post(reverse("console:dualwrite"), {"keys": "10", "updates": "50"})
    assert started.status_code == 302
    run_id = started["Location"].rstrip("/").rsplit("/", 1)[1]
    services.dualwrite_wait(run_id=run_id, timeout_s=120)
    done = operator_client.get(started["Location"])
    assert done.status_code == 200
    text = done.content.decode()
    assert 'data-state="done"' in text and "writes/s" in text and " ms" in text
    assert "through the log" in text.lower() and "scratch directory" in text
    assert "not CDC: no PostgreSQL configured" in text
    partial = operator_client.get(started["Location"], HTTP_HX_REQUEST="true")
    assert partial.content.decode().lstrip().startswith("<section")
    assert operator_client.get(reverse("console:dualwrite_run", args=["nope"])).status_code == 404


# The broker's Kafka listener audits the capture's CreateTopics from its own thread and database
# connection, outside a test transaction: a transactional test, whose tables are emptied after
# it, so no audit row leaks into later tests.
@pytest.mark.django_db(transaction=True)
def test_with_a_postgresql_the_service_goes_through_cdc_and_converges(
    settings, listening_broker, pg_dsn
):
    """TIDELOG_DUALWRITE_POSTGRES set and the console's Kafka listener on: the second mode is
    CDC (writers upsert into PostgreSQL, logical decoding into the broker, a consumer applies
    the changes to the index), under the schedule that makes the direct mode diverge."""
    settings.TIDELOG_DUALWRITE_POSTGRES = pg_dsn
    through = services.dualwrite_through()
    assert through.mode == "cdc" and "the database is PostgreSQL (127.0.0.1:" in through.label
    run_id = services.dualwrite_start(keys=15, updates=120, interleaving=ForcedInterleaving())
    view = services.dualwrite_wait(run_id=run_id, timeout_s=180)
    assert view.state == "done", view.error
    direct, cdc = view.results["direct"], view.results["through"]
    assert cdc.mode == "cdc" and direct.keys == cdc.keys > 0
    assert (direct.divergent_keys, cdc.divergent_keys) == (direct.keys, 0)


def test_cdc_is_not_used_when_the_kafka_listener_is_off(settings, broker):
    settings.TIDELOG_DUALWRITE_POSTGRES = "host=127.0.0.1 port=1 dbname=x"
    through = services.dualwrite_through()
    assert through.mode == "log" and "Kafka listener is off" in through.label
