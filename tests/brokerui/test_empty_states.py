"""Empty pages say what would show there and how to get it, not only that nothing is there."""

from __future__ import annotations

import pytest
from django.urls import reverse

from brokerui.console.search.services import close_saved_searches


@pytest.fixture
def no_searches(broker):
    yield broker
    close_saved_searches()


def test_no_saved_searches_says_how_to_save_one(operator_client, no_searches):
    page = operator_client.get(reverse("console:searches")).content.decode()
    assert 'id="no-searches"' in page
    assert "Save one below" in page and "status:paid AND total:&gt;=100" in page


def test_a_viewer_is_told_who_can_save_a_search(viewer_client, no_searches):
    page = viewer_client.get(reverse("console:searches")).content.decode()
    assert "An operator can save one." in page and "Save one below" not in page


def test_no_open_transactions_says_what_would_show(viewer_client, broker):
    page = viewer_client.get(reverse("console:transactions")).content.decode()
    assert "No open transactions right now." in page
    assert "transactional.id" in page and "until it commits or aborts" in page
