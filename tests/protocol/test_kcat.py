"""Debian's kcat (librdkafka 2.0.2, which enables features only on exact old versions) against
the listener: metadata, produce (compressed), consume, and a balanced consumer group."""

from __future__ import annotations

import json
import subprocess

import pytest

from streams.log import compression
from streams.log import records as rb
from tests.system_programs import require_program


@pytest.fixture(autouse=True)
def _kcat_installed():
    require_program("kcat")


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kcat", "-b", bootstrap, "-X", "session.timeout.ms=6000", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_metadata_lists_topics_partitions_and_this_broker(broker, bootstrap):
    broker.store.create_topic("clicks", 3)
    meta = json.loads(kcat(bootstrap, "-L", "-J"))
    port = int(bootstrap.rsplit(":", 1)[1])
    assert meta["brokers"] == [{"id": 0, "name": bootstrap}]
    assert meta["controllerid"] == 0
    clicks = next(t for t in meta["topics"] if t["topic"] == "clicks")
    assert [p["partition"] for p in clicks["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 0 for p in clicks["partitions"])
    assert port > 0


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_round_trip(broker, bootstrap, codec):
    lines = [f"key-{i}:value {i} {codec}" for i in range(50)]
    kcat(bootstrap, "-P", "-t", "kc", "-K:", "-p", "0", "-z", codec, stdin="\n".join(lines) + "\n")
    out = kcat(bootstrap, "-C", "-t", "kc", "-o", "beginning", "-e", "-f", "%k:%s@%o\n")
    assert out.splitlines() == [f"{line}@{i}" for i, line in enumerate(lines)]
    stored = broker.store.read("kc", 0, 0, max_records=100)
    assert [(r.key, r.value) for r in stored] == [
        (f"key-{i}".encode(), f"value {i} {codec}".encode()) for i in range(50)
    ]
    # kcat's old librdkafka compresses only when Produce v0 is in the advertised range (a
    # batch that would not shrink, like a lone first record, is sent uncompressed)
    expected = {name: code for code, name in compression.NAMES.items()}[codec]
    assert _stored_codecs(broker.store, "kc") | {compression.NONE} == {compression.NONE, expected}


def _stored_codecs(store, topic: str) -> set[int]:
    raw = store.read_batches(topic, 0, 0, 1 << 24)
    codecs, pos = set(), 0
    while pos < len(raw):
        h = rb.parse_header(raw, pos)
        codecs.add(h.codec)
        pos += h.size
    return codecs


def test_balanced_consumer_group_reads_everything_and_commits(broker, bootstrap):
    broker.store.create_topic("kg", 2)
    for p in (0, 1):
        lines = "".join(f"k{p}-{i}:v{p}-{i}\n" for i in range(20))
        kcat(bootstrap, "-P", "-t", "kg", "-K:", "-p", str(p), stdin=lines)
    out = kcat(bootstrap, "-G", "kcat-group", "kg", "-o", "beginning", "-e", "-f", "%p %k %s\n")
    got = sorted(tuple(line.split(" ")) for line in out.splitlines())
    assert got == sorted((str(p), f"k{p}-{i}", f"v{p}-{i}") for p in (0, 1) for i in range(20))
    committed = broker.coordinator.committed("kcat-group")
    assert {tp: c.offset for tp, c in committed.items()} == {("kg", 0): 20, ("kg", 1): 20}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_over_tls(tmp_path, mechanism):
    """kcat's librdkafka 2.0.2 sends SCRAM's client-final nonce in its pre-2.6.1 form, which
    the listener accepts (as Kafka 3.8.1-3.9 did)."""
    from tests.protocol.conftest import open_broker
    from tests.protocol.sasl_users import PASSWORDS, Users
    from tests.tls import self_signed_cert

    cert, key = self_signed_cert(tmp_path)
    broker = open_broker(
        tmp_path / "data", authenticator=Users(), tls_cert_file=str(cert), tls_key_file=str(key)
    )
    try:
        host, port = broker.kafka_address

        def sasl(user: str, password: str) -> list[str]:
            return [
                *("-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={cert}"),
                *("-X", f"sasl.mechanism={mechanism}", "-X", f"sasl.username={user}"),
                *("-X", f"sasl.password={password}"),
            ]

        operator = sasl("olivia", PASSWORDS["olivia"])
        kcat(f"{host}:{port}", *operator, "-P", "-t", "secure", stdin="one\ntwo\n")
        viewer = sasl("victor", PASSWORDS["victor"])
        out = kcat(f"{host}:{port}", *viewer, "-C", "-t", "secure", "-o", "beginning", "-e")
        assert out.splitlines() == ["one", "two"]
        with pytest.raises(subprocess.CalledProcessError) as refused:
            kcat(f"{host}:{port}", *sasl("olivia", "guess"), "-L")
        assert "Invalid username or password" in refused.value.stderr
    finally:
        broker.close()
