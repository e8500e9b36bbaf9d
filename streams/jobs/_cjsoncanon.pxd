# cython: language_level=3
"""The compiled test "these JSON bytes are canonical" of stream jobs (streams/jobs/_crecords.pyx:
``json_canonical_bytes``, and its reading of a join's inputs): inline, so each module that
cimports it compiles its own copy of one definition. The Python reference is
``serde.json_canonical`` (the grammar is written out there); tests/jobs/test_json_canonical.py
holds the two to the same answers."""

from libc.string cimport memcmp

# the limits of the accepted grammar (serde.json_canonical's _CANON_* constants)
cdef enum:
    _CANON_DEPTH = 64  # containers open at once
    _CANON_KEYS = 32  # keys of one object
    _CANON_DIGITS = 18  # digits of an integer (orjson's range, no 19-digit run)


cdef inline Py_ssize_t _canon_string(const unsigned char* p, Py_ssize_t i,
                                     Py_ssize_t n) noexcept nogil:
    """The end (past the closing quote) of the canonical string opening at ``p[i]`` (a
    ``"``), or -1: bytes 0x20..0x7e but ``"`` and ``\\``, and the escapes ``\\"``, ``\\\\``,
    ``\\n``, ``\\r``, ``\\t``, ``\\b``, ``\\f``."""
    cdef unsigned char c
    i += 1
    while i < n:
        c = p[i]
        if c == 34:  # "
            return i + 1
        if c == 92:  # \
            i += 1
            if i >= n:
                return -1
            c = p[i]
            if not (c == 34 or c == 92 or c == 110 or c == 114 or c == 116 or c == 98
                    or c == 102):  # " \ n r t b f
                return -1
        elif c < 0x20 or c > 0x7e:
            return -1
        i += 1
    return -1


cdef inline Py_ssize_t _canon_int(const unsigned char* p, Py_ssize_t i,
                                  Py_ssize_t n) noexcept nogil:
    """The end of the canonical integer at ``p[i]`` (``0`` or ``-?[1-9][0-9]*``, at most 18
    digits; not ``-0``), or -1. A digit right after it is left to the caller (it rejects it)."""
    cdef Py_ssize_t start
    if p[i] == 48:  # 0
        return i + 1
    if p[i] == 45:  # -
        i += 1
    if i >= n or p[i] < 49 or p[i] > 57:  # [1-9]
        return -1
    start = i
    while i < n and 48 <= p[i] <= 57:
        i += 1
    if i - start > _CANON_DIGITS:
        return -1
    return i


cdef inline bint _canon_word(const unsigned char* p, Py_ssize_t i, Py_ssize_t n,
                             const char* word, Py_ssize_t m) noexcept nogil:
    return n - i >= m and memcmp(p + i, word, m) == 0


cdef inline bint json_canonical(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Whether the `n` bytes at `p` are canonical: ``JSON.serialize(JSON.deserialize(b)) ==
    b``. Conservative: False for some canonical bytes, never True for others. One value, no
    whitespace; objects, arrays, strings (printable ASCII and the escapes json.dumps writes),
    integers (``-?(0|[1-9][0-9]*)``, at most 18 digits, not ``-0``), ``true``, ``false`` and
    (not as the whole input: ``JSON.serialize(None)`` is None) ``null``; at most 64 containers
    deep, at most 32 keys an object, no key repeated."""
    # the open containers: kind[d] 1 an array, 2 an object; an object's keys so far (their
    # offsets and lengths) to find a repeated one
    cdef unsigned char kind[_CANON_DEPTH]
    cdef int nkeys[_CANON_DEPTH]
    cdef Py_ssize_t key_at[_CANON_DEPTH][_CANON_KEYS]
    cdef Py_ssize_t key_len[_CANON_DEPTH][_CANON_KEYS]
    cdef int depth = 0, state = 0  # 0: a value next; 1: an object's key next; 2: a value ended
    cdef int d, k, j
    cdef Py_ssize_t i = 0, end, m
    cdef unsigned char c
    if n <= 0 or (n == 4 and memcmp(p, b"null", 4) == 0):
        return False
    while True:
        if state == 0:  # a value
            if i >= n:
                return False
            c = p[i]
            if c == 91 or c == 123:  # [ {
                if depth == _CANON_DEPTH:
                    return False
                kind[depth] = 1 if c == 91 else 2
                nkeys[depth] = 0
                depth += 1
                i += 1
                if i < n and p[i] == c + 2:  # ] }: empty
                    i += 1
                    depth -= 1
                    state = 2
                elif c == 123:
                    state = 1
            elif c == 34:  # "
                i = _canon_string(p, i, n)
                if i < 0:
                    return False
                state = 2
            elif c == 116 or c == 102 or c == 110:  # t f n
                if _canon_word(p, i, n, b"true", 4):
                    i += 4
                elif _canon_word(p, i, n, b"false", 5):
                    i += 5
                elif _canon_word(p, i, n, b"null", 4):
                    i += 4
                else:
                    return False
                state = 2
            elif c == 45 or 48 <= c <= 57:  # - 0-9
                i = _canon_int(p, i, n)
                if i < 0:
                    return False
                state = 2
            else:
                return False
        elif state == 1:  # an object's key, then ':'
            if i >= n or p[i] != 34:
                return False
            end = _canon_string(p, i, n)
            if end < 0:
                return False
            m = end - i
            d = depth - 1
            k = nkeys[d]
            if k == _CANON_KEYS:
                return False
            for j in range(k):
                if key_len[d][j] == m and memcmp(p + key_at[d][j], p + i, m) == 0:
                    return False  # repeated
            key_at[d][k] = i
            key_len[d][k] = m
            nkeys[d] = k + 1
            if end >= n or p[end] != 58:  # :
                return False
            i = end + 1
            state = 0
        else:  # a value ended: the end, ',' or the container's close
            if depth == 0:
                return i == n
            if i >= n:
                return False
            c = p[i]
            i += 1
            if c == 44:  # ,
                state = 0 if kind[depth - 1] == 1 else 1
            elif (c == 93 and kind[depth - 1] == 1) or (c == 125 and kind[depth - 1] == 2):
                depth -= 1
            else:
                return False
