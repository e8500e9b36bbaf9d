# cython: language_level=3
"""The test of orjson's bytes shared by the compiled encoders of stream jobs
(streams/jobs/_crecords.pyx, _cstate.pyx): inline, so each module compiles its own copy of one
definition. The Python reference is ``serde.compact_json_bytes``'s ``encode_exact``."""


cdef inline bint _json_exact(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Whether orjson's `n` bytes at `p` are the text ``json.dumps`` writes: ASCII without DEL,
    no ``null``, no digit followed by ``.``, ``e`` or ``E`` (a float, which json may write
    otherwise)."""
    cdef Py_ssize_t i
    cdef unsigned char c
    for i in range(n):
        c = p[i]
        if c >= 0x7f:
            return False
        if c == 110 and i + 3 < n and p[i + 1] == 117 and p[i + 2] == 108 and p[i + 3] == 108:
            return False  # null
        if (c == 46 or c == 101 or c == 69) and i > 0 and 48 <= p[i - 1] <= 57:
            return False  # [0-9][.eE]
    return True
