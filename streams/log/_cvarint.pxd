# cython: language_level=3
"""The record format's integer readers, shared by the compiled decoders that walk a record
batch's records section (streams/log/_cdecode.pyx, streams/jobs/_crecords.pyx): inline, so
each module compiles its own copy of one definition."""

from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint64_t


cdef inline bint _varint(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos,
                         int64_t* out) noexcept nogil:
    """The zig-zag varint at pos[0], read no further than `end`; False (nothing moved) when it
    runs past `end` or is wider than 64 bits."""
    cdef Py_ssize_t i = pos[0]
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char b
    while True:
        if i >= end:
            return False
        b = p[i]
        i += 1
        if shift == 63 and b > 1:
            return False
        result |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            return False
    pos[0] = i
    out[0] = (<int64_t>(result >> 1)) ^ -(<int64_t>(result & 1))
    return True


cdef inline bint _add(int64_t a, int64_t b, int64_t* out) noexcept nogil:
    """a + b into out; False when it would leave int64."""
    if (b > 0 and a > INT64_MAX - b) or (b < 0 and a < INT64_MIN - b):
        return False
    out[0] = a + b
    return True
