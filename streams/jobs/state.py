"""Keyed state stores with changelogs.

A store is a ``MutableMapping`` from keys to values (both JSON-able: keys may be strings,
numbers or tuples of those). Every store a task opens is backed by a **changelog**: a
compacted topic named ``<job>-<store>-changelog`` with one partition per task, to which the
task writes the latest value of each key it changed (``None``, a tombstone, for a deleted
key) at every commit. When a task starts (or restarts on another worker) it replays its
changelog partition into an empty store before processing anything: that is the whole of
recovery.

Backends (``Backend`` Protocol: get/put/delete/items/clear/close):

- ``MemoryBackend`` (the default): a dict.
- ``RocksDictBackend`` (``Runner(state_backend="rocksdb", state_dir=...)``): RocksDB through
  ``rocksdict`` 0.3.29 (pinned in requirements.txt), for state larger than memory. Compared
  with LMDB (``lmdb`` 3.0.0): RocksDB is what Kafka Streams and Quix Streams use for exactly
  this — an LSM tree, so the stream of small random writes that state updates are is cheap,
  where LMDB's copy-on-write B+tree rewrites a page path per committed write and needs its
  map size fixed up front (a full map is an error at run time); LMDB's strengths (many
  concurrent readers across processes, zero-copy reads) do not matter to a store owned by one
  task. ``rocksdict`` ships self-contained wheels (no system librocksdb to install). The
  changelog stays the source of truth: the RocksDB directory is a cache, wiped when a task
  opens it and rebuilt from the changelog.
  What it moves out of memory: the stores of ``process`` steps, running aggregates and joins.
  Windowed steps keep their open windows inside ``streams.processing``'s ``WindowOperator``
  (in memory whatever the backend; only their changelog snapshots pass through the store).

Thread-safety: none; a store belongs to one task.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, MutableMapping
from typing import Protocol

import orjson

from streams.errors import InvalidConfig
from streams.jobs.serde import _ORJSON_STRICT, _not_json, compact_json_bytes

try:  # the compiled changelog loop of the memory backend, built in place by `make native`
    from streams.jobs import _cstate
except ImportError:  # not built: _take_memory below
    _cstate = None

_MISSING = object()  # in Store._dirty: the key was deleted
_ABSENT = object()  # not in a dict


# a key's bytes are json.dumps's, whichever encoder wrote them (the backend and the compacted
# changelog are keyed by them); a value's are any JSON that json.loads reads back as it reads
# json.dumps's (orjson's, but for NaN and infinities: see compact_json_bytes)
encode = compact_json_bytes()
encode_value = compact_json_bytes(exact=False)


def decode_key(data: bytes) -> object:
    return _tupled(json.loads(data))


def _tupled(obj: object) -> object:
    """JSON turns tuples into lists; keys must be hashable, so lists come back as tuples."""
    if isinstance(obj, list):
        return tuple(_tupled(x) for x in obj)
    return obj


class Backend(Protocol):
    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def items(self) -> Iterator[tuple[bytes, bytes]]: ...

    def __len__(self) -> int: ...

    def clear(self) -> None: ...

    def close(self) -> None: ...


class MemoryBackend:
    def __init__(self) -> None:
        self._d: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self._d.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._d[key] = value

    def delete(self, key: bytes) -> None:
        self._d.pop(key, None)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(self._d.items()))

    def __len__(self) -> int:
        return len(self._d)

    def clear(self) -> None:
        self._d.clear()

    def close(self) -> None:
        self._d.clear()


class RocksDictBackend:
    """RocksDB via rocksdict in `path` (raw bytes mode). Wiped on open: the changelog restores."""

    def __init__(self, path: str):
        from rocksdict import Options, Rdict  # imported here: optional at runtime

        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path, exist_ok=True)
        self.path = path
        self._db = Rdict(path, options=Options(raw_mode=True))
        self._n = 0

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        if key not in self._db:
            self._n += 1
        self._db[key] = value

    def delete(self, key: bytes) -> None:
        if key in self._db:
            self._n -= 1
            del self._db[key]

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._db.items())

    def __len__(self) -> int:
        return self._n

    def clear(self) -> None:
        for key in list(self._db.keys()):
            del self._db[key]
        self._n = 0

    def close(self) -> None:
        self._db.close()
        shutil.rmtree(self.path, ignore_errors=True)


class Store(MutableMapping):
    """A keyed store over a backend that remembers which keys changed since the last commit.

    Values are kept as Python objects in a small cache of the keys touched since the last
    commit (so operators may mutate a value they got and set it back), and as JSON in the
    backend. ``take_changes()`` returns ``[(key bytes, value bytes | None)]`` for the
    changelog and writes the cache through to the backend.

    Over the in-memory backend, the objects written at a commit also stay in a second cache
    (``_objects``), so that a key read again after the commit is not decoded from its JSON
    again: the hot keys of a job are read after every commit. That costs the objects' memory
    on top of their JSON; a RocksDB-backed store (state larger than memory) keeps no such
    cache.
    """

    def __init__(self, name: str, backend: Backend | None = None):
        self.name = name
        self.backend = backend if backend is not None else MemoryBackend()
        self._dirty: dict[object, object] = {}  # key -> value or _MISSING (deleted)
        # key -> value as last written to the backend (a subset of it); memory backend only
        self._objects: dict[object, object] | None = (
            {} if isinstance(self.backend, MemoryBackend) else None
        )
        self.taken: list[tuple[object, object]] = []  # see take_changes
        self.taken_from: list | None = None

    def __getitem__(self, key: object) -> object:
        v = self._dirty.get(key, None)
        if v is not None or key in self._dirty:
            if v is _MISSING:
                raise KeyError(key)
            return v
        objects = self._objects
        if objects is not None and key in objects:
            value = objects[key]
        else:
            raw = self.backend.get(encode(key))
            if raw is None:
                raise KeyError(key)
            value = json.loads(raw)
        self._dirty[key] = value  # cached; written back (unchanged or not) at commit
        return value

    def get(self, key: object, default: object = None) -> object:
        # __getitem__ inlined: operators call get for every record, often for a missing key
        v = self._dirty.get(key, _ABSENT)
        if v is not _ABSENT:
            return default if v is _MISSING else v
        objects = self._objects
        if objects is not None and key in objects:
            v = objects[key]
        else:
            raw = self.backend.get(encode(key))
            if raw is None:
                return default
            v = json.loads(raw)
        self._dirty[key] = v  # cached; written back (unchanged or not) at commit
        return v

    def direct(self) -> tuple[dict, object]:
        """``(cache, deleted)`` for an operator's compiled loop (``_cjoin``), to skip this
        class's Python methods per record: ``cache`` is the dict of keys touched since the last
        commit. A key in it maps to its value, or to ``deleted`` if deleted; a key not in it
        is read with ``get`` (which puts it there). Setting ``cache[key] = value`` (never None)
        is ``store[key] = value``; ``cache[key] = deleted`` is ``del store[key]`` for a key the
        store holds. A value got from the store is in the cache, so a value mutated in place
        needs no setting back."""
        return self._dirty, _MISSING

    def __setitem__(self, key: object, value: object) -> None:
        if value is None:
            raise InvalidConfig("value", value, "a store cannot hold None (delete the key)")
        self._dirty[key] = value

    def __delitem__(self, key: object) -> None:
        if key not in self:
            raise KeyError(key)
        self._dirty[key] = _MISSING

    def __contains__(self, key: object) -> bool:
        v = self._dirty.get(key, None)
        if v is not None or key in self._dirty:
            return v is not _MISSING
        if self._objects is not None and key in self._objects:
            return True
        return self.backend.get(encode(key)) is not None

    def __iter__(self) -> Iterator[object]:
        seen = set()
        for k, v in list(self._dirty.items()):
            seen.add(k)
            if v is not _MISSING:
                yield k
        for raw, _ in self.backend.items():
            k = decode_key(raw)
            if k not in seen:
                yield k

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def scan(self) -> Iterator[tuple[object, object]]:
        """Every ``(key, value)``, read from the backend without caching what it reads (so a
        RocksDB-backed store can be scanned at restore without loading it all into memory)."""
        for k, v in list(self._dirty.items()):
            if v is not _MISSING:
                yield k, v
        for raw, value in self.backend.items():
            k = decode_key(raw)
            if k not in self._dirty:
                yield k, json.loads(value)

    def take_changes(self) -> list[tuple[bytes, bytes | None]]:
        """The changelog records of the keys changed since the last call, written through to
        the backend. ``taken`` then holds the same changes as objects, ``(key, value or
        None)`` in the same order, and ``taken_from`` the list returned (so that a reader of
        ``taken`` can tell they belong to the changes it has): the store's own objects, not
        copies, which nobody may modify."""
        out: list[tuple[bytes, bytes | None]] = []
        taken: list[tuple[object, object]] = []
        backend, objects = self.backend, self._objects
        if objects is not None and type(backend) is MemoryBackend:
            if _cstate is not None:
                _cstate.take_memory(
                    self._dirty, backend._d, objects, _MISSING, out, taken,
                    encode, encode_value, orjson.dumps, _not_json, _ORJSON_STRICT,
                )  # fmt: skip
            else:
                _take_memory(self._dirty, backend._d, objects, out, taken)
            self._dirty.clear()
            self.taken, self.taken_from = taken, out
            return out
        for key, value in self._dirty.items():
            k = encode(key)
            if value is _MISSING:
                if backend.get(k) is not None:
                    backend.delete(k)
                out.append((k, None))
                taken.append((key, None))
                if objects is not None:
                    objects.pop(key, None)
            else:
                v = encode_value(value)
                if backend.get(k) != v:
                    backend.put(k, v)
                    out.append((k, v))
                    taken.append((key, value))
                if objects is not None:
                    objects[key] = value
        self._dirty.clear()
        self.taken, self.taken_from = taken, out
        return out

    def restore(self, key: bytes, value: bytes | None) -> None:
        """Apply one changelog record (the last one of a key wins; None deletes)."""
        if self._objects:
            self._objects.pop(decode_key(key), None)
        if value is None:
            self.backend.delete(key)
        else:
            self.backend.put(key, value)

    def size(self) -> int:
        return len(self.backend)

    def close(self) -> None:
        self._dirty.clear()
        if self._objects is not None:
            self._objects.clear()
        self.backend.close()


def _take_memory(dirty: dict, d: dict, objects: dict, out: list, taken: list) -> None:
    """``take_changes``'s loop over a ``MemoryBackend``'s dict `d` (the same steps, its
    methods inlined): the reference and fallback of ``_cstate.take_memory``."""
    enc_key, enc_value, missing = encode, encode_value, _MISSING
    pop, get, out_append, taken_append = d.pop, d.get, out.append, taken.append
    for key, value in dirty.items():
        k = enc_key(key)
        if value is missing:
            pop(k, None)
            out_append((k, None))
            taken_append((key, None))
            objects.pop(key, None)
        else:
            v = enc_value(value)
            if get(k) != v:
                d[k] = v
                out_append((k, v))
                taken_append((key, value))
            objects[key] = value


def changelog_topic(job: str, store: str) -> str:
    return f"{job}-{store}-changelog"


def make_backend(kind: str, path: str | None) -> Backend:
    if kind == "memory":
        return MemoryBackend()
    if kind == "rocksdb":
        if path is None:
            raise InvalidConfig("state_dir", path, "the rocksdb state backend needs a state_dir")
        return RocksDictBackend(path)
    raise InvalidConfig("state_backend", kind, "must be memory or rocksdb")
