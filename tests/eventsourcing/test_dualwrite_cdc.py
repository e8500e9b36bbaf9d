"""The dual-write race's cdc mode against a real PostgreSQL 15 (logical decoding) and a real
Tidelog broker: under the interleaving that makes the direct mode diverge on every key, the
writers' upserts carried by CDC into the log leave the index equal to the table."""

from __future__ import annotations

import psycopg2

from streams.eventsourcing.dualwrite import DualWriteRace, ForcedInterleaving, RandomPauses


def test_cdc_mode_converges_under_the_interleaving_that_makes_direct_writes_diverge(
    tmp_path, pg_dsn, bootstrap
):
    race = DualWriteRace(str(tmp_path), keys=20, updates=150, interleaving=ForcedInterleaving())
    touched = len(set(race.key_of_round))
    assert race.run_direct().divergent_keys == touched
    result = race.run_cdc(pg_dsn, bootstrap)
    assert (result.keys, result.divergent_keys, result.writes) == (touched, 0, 300)
    assert race.progress().applied_index == 300
    # the run cleaned up after itself: no table, publication or slot left behind
    conn = psycopg2.connect(pg_dsn)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'tidelog_dualwrite_%'"
        )
        slots = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'tidelog_dualwrite_%'")
        tables = cur.fetchone()[0]
    conn.close()
    assert (slots, tables) == (0, 0)


def test_cdc_mode_converges_with_threads_racing_freely(tmp_path, pg_dsn, bootstrap):
    race = DualWriteRace(
        str(tmp_path), keys=30, updates=300, interleaving=RandomPauses(0.2, seed=5), seed=5
    )
    result = race.run_cdc(pg_dsn, bootstrap)
    assert result.divergent_keys == 0 and result.keys == len(set(race.key_of_round))
