"""Kafka's byte layouts for group state, so Kafka clients and tools can share it with us.

``__consumer_offsets`` records are "version-prefixed" (an int16 version, then the struct):

    OffsetCommitKey v1     group: string, topic: string, partition: int32
    OffsetCommitValue v3   offset: int64, leaderEpoch: int32, metadata: string,
                           commitTimestamp: int64
    GroupMetadataKey v2    group: string
    GroupMetadataValue v3  protocolType: string, generation: int32, protocol: string?,
                           leader: string?, currentStateTimestamp: int64,
                           members: [memberId, groupInstanceId?, clientId, clientHost,
                                     rebalanceTimeout: int32, sessionTimeout: int32,
                                     subscription: bytes, assignment: bytes]

and the consumer protocol carried in JoinGroup/SyncGroup metadata (``ConsumerProtocol``):

    Subscription v1   topics: [string], userData: bytes?, ownedPartitions: [topic, [int32]]
    Assignment v1     assignedPartitions: [topic, [int32]], userData: bytes?

Strings are int16-length UTF-8 (-1 = null), bytes int32-length (-1 = null), arrays int32-count.
"""

from __future__ import annotations

import dataclasses
import functools
import struct

from streams.errors import CorruptRecord

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50


# --------------------------------------------------------------------------- primitives


class Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> Writer:
        self.parts.append(struct.pack(">h", v))
        return self

    def int32(self, v: int) -> Writer:
        self.parts.append(struct.pack(">i", v))
        return self

    def int64(self, v: int) -> Writer:
        self.parts.append(struct.pack(">q", v))
        return self

    def string(self, v: str | None) -> Writer:
        if v is None:
            return self.int16(-1)
        b = v.encode()
        self.int16(len(b))
        self.parts.append(b)
        return self

    def bytes_(self, v: bytes | None) -> Writer:
        if v is None:
            return self.int32(-1)
        self.int32(len(v))
        self.parts.append(bytes(v))
        return self

    def done(self) -> bytes:
        return b"".join(self.parts)


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: str, size: int) -> int:
        if self.pos + size > len(self.data):
            raise CorruptRecord("group record truncated")
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return v

    def int16(self) -> int:
        return self._take(">h", 2)

    def int32(self) -> int:
        return self._take(">i", 4)

    def int64(self) -> int:
        return self._take(">q", 8)

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        return self._raw(n).decode(errors="replace")

    def bytes_(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            return None
        return self._raw(n)

    def _raw(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise CorruptRecord("group record truncated")
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def count(self) -> int:
        n = self.int32()
        if n < -1 or n > len(self.data):
            raise CorruptRecord(f"implausible array length {n}")
        return max(n, 0)


# --------------------------------------------------------------------------- partitioning


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed int32."""
    h = 0
    for unit in struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=4096)
def offsets_partition_for(group: str, partitions: int = OFFSETS_TOPIC_PARTITIONS) -> int:
    """``Utils.abs(groupId.hashCode()) % partitions`` (Utils.abs maps MIN_VALUE to 0); cached:
    every offset commit asks it, and the hash is a Python loop over the name."""
    h = java_string_hash(group)
    return (0 if h == -(2**31) else abs(h)) % partitions


# --------------------------------------------------------------------------- offsets topic


@dataclasses.dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        return Writer().int16(1).string(self.group).string(self.topic).int32(self.partition).done()


@dataclasses.dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1

    def encode(self) -> bytes:
        w = Writer().int16(3).int64(self.offset).int32(self.leader_epoch)
        return w.string(self.metadata).int64(self.commit_timestamp).done()

    @classmethod
    def decode(cls, data: bytes) -> OffsetCommitValue:
        r = Reader(data)
        version = r.int16()
        offset = r.int64()
        epoch = r.int32() if version >= 3 else -1
        metadata = r.string() or ""
        ts = r.int64()
        return cls(offset, metadata, ts, epoch)


@dataclasses.dataclass(frozen=True)
class GroupMetadataKey:
    group: str

    def encode(self) -> bytes:
        return Writer().int16(2).string(self.group).done()


@dataclasses.dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclasses.dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int
    members: tuple[MemberMetadata, ...] = ()

    def encode(self) -> bytes:
        w = Writer().int16(3).string(self.protocol_type).int32(self.generation)
        w.string(self.protocol).string(self.leader).int64(self.state_timestamp)
        w.int32(len(self.members))
        for m in self.members:
            w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
            w.string(m.client_host).int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
            w.bytes_(m.subscription).bytes_(m.assignment)
        return w.done()

    @classmethod
    def decode(cls, data: bytes) -> GroupMetadataValue:
        r = Reader(data)
        version = r.int16()
        protocol_type = r.string() or ""
        generation = r.int32()
        protocol = r.string()
        leader = r.string()
        ts = r.int64() if version >= 2 else -1
        members = []
        for _ in range(r.count()):
            member_id = r.string() or ""
            instance = r.string() if version >= 3 else None
            client_id, host = r.string() or "", r.string() or ""
            rebalance = r.int32() if version >= 1 else -1
            session = r.int32()
            members.append(
                MemberMetadata(
                    member_id,
                    client_id,
                    host,
                    rebalance,
                    session,
                    r.bytes_() or b"",
                    r.bytes_() or b"",
                    instance,
                )
            )
        return cls(protocol_type, generation, protocol, leader, ts, tuple(members))


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    r = Reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string() or "", r.string() or "", r.int32())
    if version == 2:
        return GroupMetadataKey(r.string() or "")
    raise CorruptRecord(f"unknown __consumer_offsets key version {version}")


# --------------------------------------------------------------------------- consumer protocol

TopicPartitions = dict[str, list[int]]


def _write_tps(w: Writer, tps: TopicPartitions) -> None:
    w.int32(len(tps))
    for topic in sorted(tps):
        w.string(topic).int32(len(tps[topic]))
        for p in sorted(tps[topic]):
            w.int32(p)


def _read_tps(r: Reader) -> TopicPartitions:
    out: TopicPartitions = {}
    for _ in range(r.count()):
        topic = r.string() or ""
        out[topic] = [r.int32() for _ in range(r.count())]
    return out


@dataclasses.dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned: TopicPartitions = dataclasses.field(default_factory=dict)

    def encode(self) -> bytes:
        w = Writer().int16(1).int32(len(self.topics))
        for t in self.topics:
            w.string(t)
        w.bytes_(self.user_data)
        _write_tps(w, self.owned)
        return w.done()

    @classmethod
    def decode(cls, data: bytes) -> Subscription:
        r = Reader(data)
        version = r.int16()
        topics = tuple(r.string() or "" for _ in range(r.count()))
        user_data = r.bytes_() if r.pos < len(data) else None
        owned = _read_tps(r) if version >= 1 and r.pos < len(data) else {}
        return cls(topics, user_data, owned)


@dataclasses.dataclass(frozen=True)
class Assignment:
    partitions: TopicPartitions
    user_data: bytes | None = None

    def encode(self) -> bytes:
        w = Writer().int16(1)
        _write_tps(w, self.partitions)
        return w.bytes_(self.user_data).done()

    @classmethod
    def decode(cls, data: bytes | None) -> Assignment:
        if not data:
            return cls({})
        r = Reader(data)
        r.int16()
        tps = _read_tps(r)
        user_data = r.bytes_() if r.pos < len(data) else None
        return cls(tps, user_data)
