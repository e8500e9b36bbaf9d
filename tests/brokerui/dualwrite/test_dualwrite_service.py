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


def test_the_service_runs_both_modes_direct_diverges_log_converges():
    run_id = services.dualwrite_start(keys=30, updates=300, interleaving=ForcedInterleaving())
    view = services.dualwrite_wait(run_id=run_id, timeout_s=120)
    assert view.state == "done", view.error
    direct, logged = view.results["direct"], view.results["log"]
    assert direct.keys == logged.keys > 0
    assert direct.divergent_keys == direct.keys  # every key, by the forced schedule
    assert logged.divergent_keys == 0
    assert (direct.writes, logged.writes) == (1_200, 600)
    assert view.progress.updates_done == view.progress.updates_total == 600


def test_a_second_run_is_refused_while_one_runs_and_bad_sizes_get_a_clear_error():
    gate = ForcedInterleaving(timeout_s=60)
    first = services.dualwrite_start(keys=5, updates=2_000, interleaving=gate)
    try:
        with pytest.raises(services.RunBusy, match="under way"):
            services.dualwrite_start(keys=5, updates=10)
    finally:
        services.dualwrite_wait(run_id=first, timeout_s=120)
    with pytest.raises(InvalidConfig, match="keys"):
        services.dualwrite_start(keys=0, updates=10)


def test_the_page_starts_a_run_and_shows_its_results(viewer_client):
    page = viewer_client.get(reverse("console:dualwrite"))
    assert page.status_code == 200 and b"Run both" in page.content
    bad = viewer_client.post(reverse("console:dualwrite"), {"keys": "0", "updates": "10"})
    assert bad.status_code == 400 and b"greater than or equal to 1" in bad.content
    started = viewer_client.post(reverse("console:dualwrite"), {"keys": "10", "updates": "50"})
    assert started.status_code == 302
    run_id = started["Location"].rstrip("/").rsplit("/", 1)[1]
    services.dualwrite_wait(run_id=run_id, timeout_s=120)
    done = viewer_client.get(started["Location"])
    assert done.status_code == 200
    text = done.content.decode()
    assert 'data-state="done"' in text and "writes/s" in text and " ms" in text
    assert "through the log" in text.lower() and "scratch directory" in text
    partial = viewer_client.get(started["Location"], HTTP_HX_REQUEST="true")
    assert partial.content.decode().lstrip().startswith("<section")
    assert viewer_client.get(reverse("console:dualwrite_run", args=["nope"])).status_code == 404
