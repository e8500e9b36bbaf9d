"""The dual-write race (streams.eventsourcing.dualwrite) with real threads and real stores: the
direct mode diverges under a forced interleaving (every key the writers touched), the log mode
never does, whatever the interleaving."""

from __future__ import annotations

import pytest

from streams.errors import InvalidConfig
from streams.eventsourcing.dualwrite import DualWriteRace, ForcedInterleaving, RandomPauses


def test_direct_writes_diverge_under_the_forced_interleaving_and_the_log_does_not(tmp_path):
    race = DualWriteRace(str(tmp_path), keys=20, updates=200, interleaving=ForcedInterleaving())
    direct = race.run_direct()
    touched = len(set(race.key_of_round))
    # A writes the database, B the database and the index, A the index: the database ends with
    # B's value of each key and the index with A's
    assert direct.keys == touched and direct.divergent_keys == touched
    key, in_db, in_index = direct.examples[0]
    assert in_db.startswith("B") and in_index.startswith("A") and in_db[1:] == in_index[1:]
    logged = race.run_log()
    assert (logged.keys, logged.divergent_keys) == (touched, 0)
    assert race.progress().applied_db == race.progress().applied_index == 400


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_log_mode_converges_whatever_the_threads_do(tmp_path, seed):
    race = DualWriteRace(
        str(tmp_path), keys=50, updates=500, interleaving=RandomPauses(0.2, seed=seed), seed=seed
    )
    result = race.run_log()
    assert result.divergent_keys == 0 and result.keys == len(set(race.key_of_round))
    assert result.writes == 1_000


def test_bad_sizes_are_refused(tmp_path):
    with pytest.raises(InvalidConfig, match="keys"):
        DualWriteRace(str(tmp_path), keys=0)
    with pytest.raises(InvalidConfig, match="updates"):
        DualWriteRace(str(tmp_path), updates=10**9)
