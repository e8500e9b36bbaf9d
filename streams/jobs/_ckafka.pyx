# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Tidelog's compiled taking of a Kafka fetch (``streams.jobs.kafka.take_messages``, whose pure
loop stays the reference; tests/jobs/test_ckafka.py holds the two to the same answers).

One function, ``take(msgs, buffers, rtype)``: for each confluent-kafka ``Message`` of `msgs`
(what ``Consumer.consume`` returned), in order, a message without error whose
``(topic, partition)`` is a key of `buffers` is appended to that deque as an `rtype` record
``(offset, key, value, timestamp)`` (`rtype` a 4-field tuple type, ``LogRecord``); messages of
other partitions are dropped. It returns the errors met, end-of-partition ones left out, for
the caller to log. The same as the pure loop, only without its interpreter: the ``Message``
methods are called through their descriptors (no bound method per call) and each record is
allocated as its type directly (no ``NamedTuple.__new__``, no argument tuple).
"""

from cpython.tuple cimport PyTuple_GET_ITEM

cdef extern from *:
    """
    /* A 4-item instance of the tuple subtype `t`, as tuple.__new__(t, (a, b, c, d)) makes it
       (CPython's tuple_subtype_new: tp_alloc, then the items). */
    static PyObject *tidelog_record4(PyObject *t, PyObject *a, PyObject *b, PyObject *c,
                                     PyObject *d) {
        PyTypeObject *tp = (PyTypeObject *)t;
        PyObject *r = tp->tp_alloc(tp, 4);
        if (r == NULL) return NULL;
        Py_INCREF(a); PyTuple_SET_ITEM(r, 0, a);
        Py_INCREF(b); PyTuple_SET_ITEM(r, 1, b);
        Py_INCREF(c); PyTuple_SET_ITEM(r, 2, c);
        Py_INCREF(d); PyTuple_SET_ITEM(r, 3, d);
        return r;
    }
    """
    object tidelog_record4(object t, object a, object b, object c, object d)

from confluent_kafka import KafkaError, Message

cdef object _error = Message.error
cdef object _topic = Message.topic
cdef object _partition = Message.partition
cdef object _offset = Message.offset
cdef object _key = Message.key
cdef object _value = Message.value
cdef object _timestamp = Message.timestamp
cdef object _EOF = KafkaError._PARTITION_EOF


def take(list msgs, dict buffers, type rtype):
    cdef list errors = []
    cdef object m, err, topic, part, offset, ts
    cdef object last_topic = None, last_part = None, append = None
    for m in msgs:
        err = _error(m)
        if err is not None:
            if err.code() != _EOF:
                errors.append(err)
            continue
        topic = _topic(m)
        if topic is None:
            topic = ""
        part = _partition(m)
        if part is None:
            part = 0
        # a fetch's messages come in runs of one partition: one buffer lookup per run
        if last_topic is None or part != last_part or topic != last_topic:
            last_topic, last_part = topic, part
            buf = buffers.get((topic, part))
            append = None if buf is None else buf.append  # None: not (or no longer) ours
        if append is None:
            continue
        offset = _offset(m)
        if offset is None:
            offset = 0
        ts = _timestamp(m)
        append(tidelog_record4(rtype, offset, _key(m), _value(m), <object>PyTuple_GET_ITEM(ts, 1)))
    return errors
