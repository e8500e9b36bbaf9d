"""A tumbling window's changelog (and its view's store) across commits: a window that was
snapshotted at a commit gets a tombstone when it closes, also after a restart from the
changelog; one that opened and closed between two commits is never written; the view store
holds each window's row once."""

from __future__ import annotations

import json

from streams.jobs import JSON, Count, Job, Sum, Tumbling
from streams.jobs.state import Store, decode_key
from streams.jobs.task import Task


def window_job() -> Job:
    job = Job("wcl")
    job.stream("in", value=JSON).window(Tumbling(1000)).aggregate(n=Count(), s=Sum("v")).to("out")
    return job


class Harness:
    """One task over in-memory stores, committed by hand (before_commit + take_changes)."""

    def __init__(self, job: Job, changelogs: dict[str, dict] | None = None):
        self.out: list = []
        self.stores: dict[str, Store] = {}

        def open_store(name: str) -> Store:
            store = self.stores[name] = Store(name)
            for k, v in (changelogs or {}).get(name, {}).items():
                store.restore(k, v)
            return store

        self.task = Task(job, 0, lambda *a: self.out.append(a[2:]), open_store)
        self.offset = 0

    def feed(self, *recs: tuple[str, int, int]) -> None:
        batch = []
        for key, v, ts in recs:
            batch.append((key, {"v": v}, ts, self.offset))
            self.offset += 1
        self.task.feed_many("in", batch)

    def commit(self) -> dict[str, dict]:
        """Each store's changelog records of this commit: {store: {key: value or None}}."""
        self.task.before_commit()
        return {
            name: {decode_key(k): None if v is None else json.loads(v) for k, v in changes}
            for name, store in self.stores.items()
            if (changes := store.take_changes())
        }


def window_store(changes: dict) -> dict:
    return next((v for name, v in changes.items() if not name.endswith("-view")), {})


def test_a_window_written_at_a_commit_gets_a_tombstone_when_it_closes():
    h = Harness(window_job())
    h.feed(("a", 5, 100))
    first = window_store(h.commit())
    assert first[("a", 0)] == [[0, 1, 5, None, None]]
    h.feed(("b", 7, 1100), ("b", 1, 2500))  # closes a@0, opens and closes b@1000
    second = h.commit()
    assert window_store(second)[("a", 0)] is None  # tombstone
    assert ("b", 1000) not in window_store(second)  # never written, nothing to delete
    view = next(v for name, v in second.items() if name.endswith("-view"))
    assert view[("a", 0)]["n"] == 1 and view[("b", 1000)]["s"] == 7
    assert [(k, v["start"], v["n"]) for k, v, _ in h.out] == [("a", 0, 1), ("b", 1000, 1)]


def test_a_window_restored_from_its_changelog_gets_its_tombstone_too():
    job = window_job()
    h = Harness(job)
    h.feed(("a", 5, 100), ("b", 2, 900))
    h.task.before_commit()  # a commit whose changelog records the restarted task reads
    changelogs = {name: dict(store.take_changes()) for name, store in h.stores.items()}
    restarted = Harness(job, changelogs)
    restarted.feed(("a", 1, 300), ("c", 4, 1200))  # a@0 and b@0 close
    changes = window_store(restarted.commit())
    assert changes[("a", 0)] is None and changes[("b", 0)] is None
    assert sorted((k, v["start"], v["n"], v["s"]) for k, v, _ in restarted.out) == [
        ("a", 0, 2, 6),
        ("b", 0, 1, 2),
    ]
    name = next(n for n in restarted.stores if not n.endswith("-view"))
    assert set(restarted.stores[name].keys()) == {("__progress__",), ("c", 1000)}
