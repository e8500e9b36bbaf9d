"""The writer process of the SIGKILL torture test (``test_crash_recovery.py``).

Run as ``python -m tests.log.torture_writer DATA_DIR MODE SEED RUN``. It opens the store (recovering
it when the previous writer was killed), creates the topic on first use, then appends for ever:
single records and batches, keyed and unkeyed, with headers, of random sizes. After each
acknowledged append it prints one line per record, ``offset partition sha256(value)``, and flushes
stdout, so every line the parent reads is a record the store promised to keep. Lines starting with
``#`` are progress notes (``# ready`` once the store is open).

Every record is a pure function of (seed, run, index) (``make_record``), and its value starts with
``run:index:``, so the parent can recompute the exact bytes of any record it finds in the log.
"""

from __future__ import annotations

import hashlib
import random
import sys

TOPIC = "torture"
PARTITIONS = 2

# mode -> (topic config, LogStore.open keyword arguments, value-size profile)
MODES: dict[str, tuple[dict[str, str], dict[str, int], str]] = {
    # 64 KiB segments: a roll every few dozen appends; sparse index entries every KiB.
    "mixed": (
        {"segment.bytes": "65536", "index.interval.bytes": "1024"},
        {},
        "mixed",
    ),
    # 2 KiB segments and values of up to 1.5 KiB: nearly every append rolls a segment.
    "roll-heavy": (
        {"segment.bytes": "2048", "index.interval.bytes": "256"},
        {},
        "large",
    ),
    # Checkpoints every 50 ms: the recovery point moves all the time, and recovery starts from
    # an index entry in the middle of the active segment.
    "fast-checkpoints": (
        {"segment.bytes": "65536", "index.interval.bytes": "512"},
        {"checkpoint_interval_ms": 50},
        "mixed",
    ),
}


def make_record(
    seed: int, run: int, index: int, profile: str
) -> tuple[bytes | None, bytes, tuple[tuple[str, bytes | None], ...]]:
    """(key, value, headers) of record `index` of writer run `run`."""
    rng = random.Random(f"{seed}/{run}/{index}")
    roll = rng.random()
    if profile == "large":
        size = rng.randint(200, 1500)
    elif roll < 0.75:
        size = rng.randint(0, 200)
    elif roll < 0.98:
        size = rng.randint(200, 4000)
    else:
        size = rng.randint(4000, 20000)
    value = f"{run}:{index}:".encode() + rng.randbytes(size)
    key = None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 32))
    headers = tuple(
        (
            f"h{j}-{rng.randint(0, 999)}",
            None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 40)),
        )
        for j in range(rng.choice((0, 0, 1, 2, 3)))
    )
    return key, value, headers


def parse_identity(value: bytes) -> tuple[int, int]:
    """(run, index) from a value built by ``make_record``."""
    run, index, _ = value.split(b":", 2)
    return int(run), int(index)


def sha(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()


def main(argv: list[str]) -> None:
    from streams.log import LogStore, ProducerRecord

    path, mode, seed, run = argv[0], argv[1], int(argv[2]), int(argv[3])
    config, open_kwargs, profile = MODES[mode]
    out = sys.stdout
    store = LogStore.open(path, background=True, **open_kwargs)
    if TOPIC not in store.list_topics():
        store.create_topic(TOPIC, partitions=PARTITIONS, config=config)
    out.write("# ready\n")
    out.flush()
    index = 0
    step = 0
    while True:
        rng = random.Random(f"{seed}/{run}/step/{step}")
        n = 1 if rng.random() < 0.5 else rng.randint(2, 12)
        # Mostly an explicit partition; sometimes let the store choose (murmur2 / sticky).
        partition = None if rng.random() < 0.2 else rng.randrange(PARTITIONS)
        records = [make_record(seed, run, index + j, profile) for j in range(n)]
        if n == 1:
            key, value, headers = records[0]
            results = [store.append(TOPIC, value, key=key, headers=headers, partition=partition)]
        else:
            results = store.append_batch(
                TOPIC, [ProducerRecord(v, k, h) for k, v, h in records], partition=partition
            )
        # One write per step: the parent never sees half an acknowledgement line.
        acked = zip(results, records, strict=True)
        out.write("".join(f"{r.offset} {r.partition} {sha(v)}\n" for r, (_, v, _) in acked))
        out.flush()
        index += n
        step += 1


if __name__ == "__main__":
    main(sys.argv[1:])
