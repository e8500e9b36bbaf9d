# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""A compiled Avro binary reader for the schemas ``streams.schemas.avro_program`` compiles
(records, enums, arrays, maps, unions, fixed and every primitive; no logical types, no
recursive types: those stay with fastavro). It gives what fastavro's ``schemaless_reader``
gives for the same bytes and schema (held to it by tests/schemas/test_cavro.py), at a fraction
of the cost per field: the schema is a tree of tuples walked by one function.

``read(data, pos, program)`` -> (value, position after it). A payload that ends early raises
EOFError; one that does not fit the schema (a union index or enum symbol out of range, a
negative length, a varint wider than 64 bits, a string that is not UTF-8) raises ValueError
(UnicodeDecodeError for the last).
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_SetItem
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

from streams.log._cvarint cimport _varint

# op codes (streams/schemas/avro_program.py writes them)
cdef enum:
    OP_NULL = 0
    OP_BOOLEAN = 1
    OP_INT = 2
    OP_LONG = 3
    OP_FLOAT = 4
    OP_DOUBLE = 5
    OP_STRING = 6
    OP_BYTES = 7
    OP_ENUM = 8
    OP_FIXED = 9
    OP_ARRAY = 10
    OP_MAP = 11
    OP_UNION = 12
    OP_RECORD = 13


cdef inline int64_t _long(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos) except? -1:
    cdef int64_t n
    cdef Py_ssize_t i
    if not _varint(p, end, pos, &n):
        i = pos[0]
        while i < end and p[i] >= 0x80:
            i += 1
        if i >= end:
            raise EOFError("the Avro payload ends inside a number")
        raise ValueError("an Avro number wider than 64 bits")
    return n


cdef inline Py_ssize_t _length(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos) except -1:
    cdef int64_t n = _long(p, end, pos)
    if n < 0:
        raise ValueError(f"a negative Avro length ({n})")
    if n > end - pos[0]:
        raise EOFError("the Avro payload ends inside a string or bytes")
    return <Py_ssize_t>n


cdef object _read(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos, tuple prog):
    cdef int op = prog[0]
    cdef Py_ssize_t n, i
    cdef int64_t count, k
    cdef uint32_t u32
    cdef uint64_t u64
    cdef float f
    cdef double d
    cdef tuple names, fields, branches
    cdef dict out
    cdef list items
    if op == OP_NULL:
        return None
    if op == OP_BOOLEAN:
        if pos[0] >= end:
            raise EOFError("the Avro payload ends inside a boolean")
        i = pos[0]
        pos[0] = i + 1
        return p[i] != 0
    if op == OP_INT or op == OP_LONG:
        return _long(p, end, pos)
    if op == OP_FLOAT:
        if end - pos[0] < 4:
            raise EOFError("the Avro payload ends inside a float")
        i = pos[0]
        u32 = (<uint32_t>p[i]) | (<uint32_t>p[i + 1] << 8) | (<uint32_t>p[i + 2] << 16) | (
            <uint32_t>p[i + 3] << 24)
        memcpy(&f, &u32, 4)
        pos[0] = i + 4
        return <double>f
    if op == OP_DOUBLE:
        if end - pos[0] < 8:
            raise EOFError("the Avro payload ends inside a double")
        i = pos[0]
        u64 = 0
        for k in range(8):
            u64 |= (<uint64_t>p[i + k]) << (8 * k)
        memcpy(&d, &u64, 8)
        pos[0] = i + 8
        return d
    if op == OP_STRING:
        n = _length(p, end, pos)
        i = pos[0]
        pos[0] = i + n
        return PyUnicode_DecodeUTF8(<char*>(p + i), n, NULL)
    if op == OP_BYTES:
        n = _length(p, end, pos)
        i = pos[0]
        pos[0] = i + n
        return PyBytes_FromStringAndSize(<char*>(p + i), n)
    if op == OP_RECORD:
        names = prog[1]
        fields = prog[2]
        out = {}
        for i in range(len(names)):
            PyDict_SetItem(out, names[i], _read(p, end, pos, <tuple>fields[i]))
        return out
    if op == OP_UNION:
        branches = prog[1]
        k = _long(p, end, pos)
        if k < 0 or k >= len(branches):
            raise ValueError(f"union index {k} is out of range (the union has {len(branches)})")
        return _read(p, end, pos, <tuple>branches[k])
    if op == OP_ENUM:
        names = prog[1]
        k = _long(p, end, pos)
        if k < 0 or k >= len(names):
            raise ValueError(f"enum index {k} is out of range ({len(names)} symbols)")
        return names[k]
    if op == OP_FIXED:
        n = prog[1]
        if end - pos[0] < n:
            raise EOFError("the Avro payload ends inside a fixed")
        i = pos[0]
        pos[0] = i + n
        return PyBytes_FromStringAndSize(<char*>(p + i), n)
    if op == OP_ARRAY:
        items = []
        while True:
            count = _long(p, end, pos)
            if count == 0:
                return items
            if count < 0:  # a block with its size in bytes: the size is not needed
                count = -count
                _long(p, end, pos)
            for k in range(count):
                items.append(_read(p, end, pos, <tuple>prog[1]))
    if op == OP_MAP:
        out = {}
        while True:
            count = _long(p, end, pos)
            if count == 0:
                return out
            if count < 0:
                count = -count
                _long(p, end, pos)
            for k in range(count):
                n = _length(p, end, pos)
                i = pos[0]
                pos[0] = i + n
                key = PyUnicode_DecodeUTF8(<char*>(p + i), n, NULL)
                out[key] = _read(p, end, pos, <tuple>prog[1])
    raise ValueError(f"unknown Avro program op {op}")


def read(const unsigned char[::1] data, Py_ssize_t pos, tuple program):
    """The value at `pos` of `data` under `program`, and the position after it."""
    cdef const unsigned char* p = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t at = pos
    value = _read(p, data.shape[0], &at, program)
    return value, at
