"""Search on streams: stored queries, the events flow through them (Elasticsearch's percolator).

::

    job = Job("alerts")
    events = job.stream("logs", value=JSON)
    events.search(queries="saved-searches").to("saved-search-matches")

The queries are the records of a (compacted) topic: key = query id, value = the query text
(a string, or ``{"query": text, ...}``); a later record of a key changes its query, a
tombstone (``None``) deletes it. Every event is matched against every live query, and each
match is emitted as ``(query id, {"query": id, "key": event key, "event": event}, event ts)``.

**Query syntax** — Lucene's / Elasticsearch's ``query_string``, parsed by luqum 1.0.0::

    status:error AND service:"checkout api" AND latency_ms:[500 TO *] NOT env:dev

- ``field:term`` — the field (dotted path into nested objects; any element of a list) holds
  the term; ``term`` alone: any field does. Text is *analysed*: lowercased and split into
  words (``\\w+``, keeping ``1.5`` and ``a.b.c`` together), so ``message:timeout`` matches
  ``"Upstream TIMEOUT after 5s"``; numbers and booleans are words too (``status:500`` matches
  ``500`` and ``"500"``; ``2.0`` is ``2``). A term that analyses into several words is a
  phrase.
- ``field:"some words"`` — the words, consecutive, in one value of the field.
- ``field:[lo TO hi]``, ``{lo TO hi}`` (exclusive), mixed ``[lo TO hi}``, ``*`` for an open
  end, and ``field:>=lo``, ``>``, ``<``, ``<=`` — numbers (the field's numbers, or strings
  that read as numbers), or times when the bounds are ISO-8601 dates/times
  (``ts:[2026-01-01 TO 2026-01-02T12:00:00Z}``; the field holds epoch milliseconds or an
  ISO-8601 string; times without an offset are UTC; quote a bound with an offset:
  ``at:>="2026-03-01T13:00:00+02:00"``).
- ``field:*`` — the field is present (not null); ``*`` or ``*:*`` — every event.
- ``AND``, ``OR``, ``NOT``, ``( )``, ``field:(a OR b)``, and Lucene's clause prefixes ``+x``
  (required) and ``-x`` (prohibited). Terms side by side without an operator are Lucene
  clauses with Elasticsearch's default operator ``OR``: ``a b -c`` matches events with a or
  b and not c; ``+a b`` requires a; a query of only prohibited clauses (``NOT env:dev``)
  matches every event that has none of them (Elasticsearch's reading, not Lucene's).
- Not supported (a ``QueryError`` says where): wildcards inside terms (``err*``), fuzzy
  (``~``), proximity, boosts (``^``), regular expressions.

``explain(query)`` gives the query back fully bracketed, so a user sees how it was read.

**Index** (``QueryIndex``) — the percolator idea: each query is reduced to a small set of
*index keys* at least one of which an event must contain for the query to match —
``(field, word)`` for a term or phrase (for an unfielded term the field ``""``, which holds
every word of the event), ``(field, None)`` ("field present") for a range or ``field:*``. A
phrase is indexed on one of its words, an AND on the key set of one of its children (word
keys before field presence), an OR on the union of its children's; a NOT gives none. Which
word and which child: the ones the fewest live queries use anywhere when the query is added
(the index has no statistics of the events; a word many queries share — ``product`` in
``page:"product 17"``, ``status:error`` — is taken as common in events too), so that each
event meets few candidates (a choice is not revisited as other queries come and go).
A query with no key set (only negations, ``*``, or an OR with such a branch) is put on an
*always check* list (``QueryIndex.describe`` counts them; ``streams.jobs.saved.validate``
tells the user who writes one). An event is analysed
once; its words and present fields are looked up in the posting lists; only the queries found
there and those on the always-check list are evaluated — except the queries that are one
word or an OR of words (``message:a OR message:b``): finding one of their keys in the event is
their match, so they are not evaluated at all. The cost per event is therefore
(words in the event) + (candidates) + (always-check queries), not (live queries).

**Parsing.** luqum's (PLY) parser costs 0.15-1 ms a query, so a job reading 100,000 saved
searches at start spent minutes in it. ``parse`` first tries a small recursive-descent reader
of the common shapes (fielded words, phrases, ranges and comparisons; ``AND`` / ``OR`` /
``NOT`` set off by spaces, ``+``/``-``, brackets) that builds the same luqum tree without
PLY, and gives luqum everything else (terms side by side, lowercase operators, escapes,
wildcards, errors: their messages and positions stay luqum's). A hypothesis test checks over
generated queries and near misses that both readings compile to the same tree.

State: the index lives in memory and is rebuilt at start by reading the queries topic from its
beginning (it is a *global* source: every task reads all of its partitions, as Kafka Streams'
GlobalKTable; the topic is the changelog). A query change applies to the events processed
after it was read (processing order, not event time). A record whose query does not parse
removes the key's earlier query and is kept in ``QueryIndex.errors`` (the console validates
before it saves, so these come only from other writers); it does not stop the job.

Thread-safety: ``parse``/``explain``/``compile_query`` may be called from any thread (the
parser is shared and locked); a ``QueryIndex`` belongs to one task (one thread).
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from luqum import tree as lt
from luqum.exceptions import IllegalCharacterError, ParseError
from luqum.parser import parser as _luqum

from streams.errors import TidelogError

_PARSE_LOCK = threading.Lock()  # PLY's parser keeps state between tokens
_WORD = re.compile(r"\w+(?:[.']\w+)*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_POS = re.compile(r"at position (\d+)")
MAX_QUERY_CHARS = 10_000


class QueryError(TidelogError):
    """A query that cannot be parsed or run; `position` is the 0-based character offset of
    the problem (``None``: at the end of the query)."""

    code = "invalid_query"

    def __init__(self, message: str, position: int | None, query: str):
        where = "at the end" if position is None else f"at position {position}"
        super().__init__(f"{message} ({where})")
        self.reason, self.position, self.query = message, position, query

    def pointer(self) -> str:
        """The query with a caret line under the problem, for a monospaced display."""
        pos = len(self.query) if self.position is None else self.position
        return f"{self.query}\n{' ' * pos}^"


# ---------------------------------------------------------------------- the compiled tree


@dataclass(frozen=True)
class Node:
    """A compiled query node. kind: term (words: one word, or a phrase), range, exists, all,
    and, or, not, bool (Lucene clauses: must, should, must_not)."""

    kind: str
    field: str = ""
    words: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    include_low: bool = True
    include_high: bool = True
    time: bool = False
    children: tuple[Node, ...] = ()
    must: tuple[Node, ...] = ()
    should: tuple[Node, ...] = ()
    must_not: tuple[Node, ...] = ()


def words(text: str) -> list[str]:
    """The analyser: lowercased words."""
    return _WORD.findall(text.lower())


def _scalar_word(value: object) -> str | None:
    """A number or boolean as the one word it analyses to (``2.0`` -> ``"2"``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return str(int(value)) if value.is_integer() else repr(value)
    return None


def _term_words(text: str) -> list[str]:
    """A term's words: a number is the one word of its value (as an event's numbers are)."""
    if _NUMBER.fullmatch(text):
        w = _scalar_word(float(text))
        if w is not None:
            return [w]
    return words(text)


def parse(query: str) -> Node:
    """Parse `query` (the syntax in the module docstring) into a compiled tree; raises
    ``QueryError`` with the position of the problem."""
    if not isinstance(query, str):
        raise QueryError("a query is text", 0, str(query))
    if not query.strip():
        raise QueryError("the query is empty", 0, query)
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is longer than {MAX_QUERY_CHARS} characters", 0, query)
    tree = _fast_tree(query)
    if tree is not None:
        try:
            return _Compiler(query).node(tree, None)
        except (QueryError, RecursionError):
            pass  # luqum's reading says where
    return _luqum_parse(query)


def _luqum_parse(query: str) -> Node:
    """`query` read by luqum (every shape; errors with their positions), compiled."""
    try:
        with _PARSE_LOCK:
            tree = _luqum.parse(query)
    except IllegalCharacterError as exc:
        m = _POS.search(str(exc))
        raise QueryError("illegal character", int(m.group(1)) if m else 0, query) from None
    except ParseError as exc:
        m = _POS.search(str(exc))
        text = str(exc)
        if m:
            bad = query[int(m.group(1)) :].split(" ", 1)[0] or "?"
            raise QueryError(f"unexpected {bad!r}", int(m.group(1)), query) from None
        if "end" in text:
            raise QueryError(
                "the query ends too early (an operator without its right side, or a "
                "bracket or quote left open)",
                None,
                query,
            ) from None
        raise QueryError(text, 0, query) from None
    except RecursionError:
        raise QueryError("the query is nested too deeply", 0, query) from None
    return _Compiler(query).node(tree, None)


class _Compiler:
    def __init__(self, query: str):
        self.query = query

    def error(self, msg: str, item: lt.Item) -> QueryError:
        return QueryError(msg, getattr(item, "pos", None) or 0, self.query)

    def node(self, item: lt.Item, field: str | None) -> Node:
        if isinstance(item, lt.SearchField):
            if field is not None:
                raise self.error(f"field {item.name!r} inside field {field!r}", item)
            name = _unescape(item.name)
            if name == "*":
                if isinstance(item.expr, lt.Word) and item.expr.value == "*":
                    return Node("all")
                raise self.error("the field * takes only * (*:* matches every event)", item)
            return self.node(item.expr, name)
        if isinstance(item, (lt.Group, lt.FieldGroup)):
            return self.node(item.expr, field)
        if isinstance(item, lt.AndOperation):
            return Node("and", children=tuple(self.node(c, field) for c in item.children))
        if isinstance(item, lt.OrOperation):
            kids = []
            for c in item.children:
                if isinstance(c, lt.Prohibit):
                    kids.append(Node("not", children=(self.node(c.a, field),)))
                elif isinstance(c, lt.Plus):
                    kids.append(self.node(c.a, field))
                else:
                    kids.append(self.node(c, field))
            return Node("or", children=tuple(kids))
        if isinstance(item, lt.UnknownOperation):
            must, should, must_not = [], [], []
            for c in item.children:
                if isinstance(c, (lt.Not, lt.Prohibit)):
                    must_not.append(self.node(c.a, field))
                elif isinstance(c, lt.Plus):
                    must.append(self.node(c.a, field))
                else:
                    should.append(self.node(c, field))
            return Node("bool", must=tuple(must), should=tuple(should), must_not=tuple(must_not))
        if isinstance(item, (lt.Not, lt.Prohibit)):
            return Node("not", children=(self.node(item.a, field),))
        if isinstance(item, lt.Plus):
            return self.node(item.a, field)
        if isinstance(item, lt.Phrase):
            ws = words(_unescape(item.value[1:-1]))
            if not ws:
                raise self.error("the phrase has no words", item)
            return Node("term", field=field or "", words=tuple(ws))
        if isinstance(item, lt.Word):
            return self.word(item, field)
        if isinstance(item, lt.Range):
            return self.range(item, field, item.low, item.high, item.include_low, item.include_high)
        if isinstance(item, lt.From):
            return self.range(item, field, item.a, None, item.include, True)
        if isinstance(item, lt.To):
            return self.range(item, field, None, item.a, True, item.include)
        what = {
            lt.Fuzzy: "fuzzy terms (~)",
            lt.Proximity: 'proximity searches ("..."~n)',
            lt.Boost: "boosts (^)",
            lt.Regex: "regular expressions",
        }.get(type(item), type(item).__name__)
        raise self.error(f"{what} are not supported", item)

    def word(self, item: lt.Word, field: str | None) -> Node:
        raw = item.value
        if raw == "*":
            return Node("exists", field=field) if field else Node("all")
        if re.search(r"(?<!\\)[*?]", raw):
            raise self.error(f"wildcards are not supported ({raw!r})", item)
        ws = _term_words(_unescape(raw))
        if not ws:
            raise self.error(f"{raw!r} has no words to search for", item)
        return Node("term", field=field or "", words=tuple(ws))

    def range(self, item, field, low, high, inc_lo, inc_hi) -> Node:
        if not field:
            raise self.error("a range needs a field (latency_ms:[500 TO *])", item)
        lo, hi = _bound_text(low), _bound_text(high)
        if lo is None and hi is None:
            return Node("exists", field=field)
        nums = [_number(b) for b in (lo, hi) if b is not None]
        if all(n is not None for n in nums):
            lo_v = None if lo is None else _number(lo)
            hi_v = None if hi is None else _number(hi)
            time = False
        else:
            times = [_time(b) for b in (lo, hi) if b is not None]
            if any(t is None for t in times):
                raise self.error(
                    "range bounds must both be numbers or both ISO-8601 dates/times "
                    f"(got {lo or '*'} and {hi or '*'})",
                    item,
                )
            lo_v = None if lo is None else _time(lo)
            hi_v = None if hi is None else _time(hi)
            time = True
        return Node(
            "range",
            field=field,
            low=lo_v,
            high=hi_v,
            include_low=inc_lo,
            include_high=inc_hi,
            time=time,
        )


def _bound_text(item: lt.Item | None) -> str | None:
    """A range bound's text (quotes allow ``+02:00``); None for ``*`` or no bound."""
    if item is None or item.value == "*":
        return None
    if isinstance(item, lt.Phrase):
        return _unescape(item.value[1:-1])
    return _unescape(item.value)


_ESCAPED = re.compile(r"\\(.)")


def _unescape(text: str) -> str:
    return _ESCAPED.sub(r"\1", text) if "\\" in text else text


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _time(text: str) -> float | None:
    """ISO-8601 date/time -> epoch ms (UTC when no offset is given)."""
    try:
        dt = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp() * 1000.0


# ---------------------------------------------------------------------- the fast path

# Tokens of the common query shapes (``_fast_tree``): anything else goes to luqum.
_FAST_TOKEN = re.compile(
    r"""\s*(?:
      (?P<field>[A-Za-z_][A-Za-z0-9_.]*):(?=[^\s])
    | (?P<phrase>"[^"\\*?~^]*")
    | (?P<range>[\[{]\s*(?P<lo>\*|[A-Za-z0-9_.]+)\s+TO\s+(?P<hi>\*|[A-Za-z0-9_.]+)\s*[\]}])
    | (?P<cmp>(?:>=|<=|>|<)(?P<bound>[A-Za-z0-9_.]+))
    | (?P<word>[A-Za-z0-9_][A-Za-z0-9_.]*)
    | (?P<op>[()]|[+-](?=[^\s]))
    )""",
    re.VERBOSE,
)
_RESERVED = frozenset({"and", "or", "not", "to"})


class _Fallback(Exception):
    """The query is not one of the shapes ``_fast_tree`` reads: luqum parses it."""


def _fast_tokens(query: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos, end = 0, len(query)
    match = _FAST_TOKEN.match
    while True:
        while pos < end and query[pos].isspace():
            pos += 1
        if pos == end:
            return out
        m = match(query, pos)
        if m is None:
            raise _Fallback
        kind = m.lastgroup or ""
        if kind == "word":
            w = m.group("word")
            if w in ("AND", "OR", "NOT"):
                start, stop = m.start("word"), m.end()
                if (start and not query[start - 1].isspace()) or (
                    stop == end or not query[stop].isspace()
                ):
                    raise _Fallback  # an operator not set off by spaces: luqum's reading
                out.append((w, None))
            elif w.lower() in _RESERVED:
                raise _Fallback  # lowercase operators and TO: luqum's reading
            else:
                out.append(("word", w))
        elif kind == "range":
            text = m.group("range")
            out.append(("range", (m.group("lo"), m.group("hi"), text[0] == "[", text[-1] == "]")))
        elif kind == "cmp":
            out.append(("cmp", (m.group("cmp")[: -len(m.group("bound"))], m.group("bound"))))
        else:
            out.append((kind, m.group(kind)))
        pos = m.end()


class _FastParser:
    """Recursive descent over ``_fast_tokens``, building the tree luqum builds for the same
    text: ``OR`` of ``AND`` of (``NOT``)* clauses, ``+``/``-`` before a clause, ``( )``,
    ``field:`` before a word, phrase, range, comparison or group. Terms side by side without
    an operator, and every other shape, raise ``_Fallback``."""

    def __init__(self, tokens: list[tuple[str, Any]]):
        self.tokens, self.i = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.i][0] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, Any]:
        if self.i >= len(self.tokens):
            raise _Fallback
        t = self.tokens[self.i]
        self.i += 1
        return t

    def query(self) -> lt.Item:
        tree = self.expr()
        if self.i != len(self.tokens):
            raise _Fallback  # e.g. two clauses without an operator
        return tree

    def expr(self) -> lt.Item:
        parts = [self.conj()]
        while self.peek() == "OR":
            self.i += 1
            parts.append(self.conj())
        return parts[0] if len(parts) == 1 else lt.OrOperation(*parts)

    def conj(self) -> lt.Item:
        parts = [self.unary()]
        while self.peek() == "AND":
            self.i += 1
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else lt.AndOperation(*parts)

    def unary(self) -> lt.Item:
        kind, value = self.take()
        if kind == "NOT":
            return lt.Not(self.unary())
        if kind == "op" and value in "+-":
            if self.peek() not in ("field", "word", "phrase", "op"):
                raise _Fallback
            inner = self.atom(*self.take())
            return lt.Plus(inner) if value == "+" else lt.Prohibit(inner)
        return self.atom(kind, value)

    def atom(self, kind: str, value: Any) -> lt.Item:
        if kind == "op" and value == "(":
            return lt.Group(self.group())
        if kind == "field":
            kind2, value2 = self.take()
            if kind2 == "op" and value2 == "(":
                return lt.SearchField(value, lt.FieldGroup(self.group()))
            if kind2 == "range":
                lo, hi, inc_lo, inc_hi = value2
                item: lt.Item = lt.Range(lt.Word(lo), lt.Word(hi), inc_lo, inc_hi)
            elif kind2 == "cmp":
                op, bound = value2
                cls = lt.From if op[0] == ">" else lt.To
                item = cls(lt.Word(bound), op.endswith("="))
            else:
                item = self.value(kind2, value2)
            return lt.SearchField(value, item)
        return self.value(kind, value)

    def value(self, kind: str, value: Any) -> lt.Item:
        if kind == "word":
            return lt.Word(value)
        if kind == "phrase":
            return lt.Phrase(value)
        raise _Fallback

    def group(self) -> lt.Item:
        inner = self.expr()
        if self.take() != ("op", ")"):
            raise _Fallback
        return inner


def _fast_tree(query: str) -> lt.Item | None:
    """The luqum tree of `query` if it has one of the common shapes, without running luqum's
    (PLY) parser (about 1 ms a query: 100,000 saved searches took minutes to load); None for
    anything else. ``tests/jobs/test_search.py`` checks, over generated queries, that every
    tree made here compiles to what luqum's does."""
    try:
        return _FastParser(_fast_tokens(query)).query()
    except (_Fallback, RecursionError):
        return None


def explain(query: str | Node) -> str:
    """The query fully bracketed, as it was read (``QueryError`` if it does not parse)."""
    node = parse(query) if isinstance(query, str) else query
    return _explain(node)


def _explain(n: Node) -> str:
    f = f"{n.field}:" if n.field else ""
    if n.kind == "all":
        return "*"
    if n.kind == "exists":
        return f"{n.field}:*"
    if n.kind == "term":
        return f + (n.words[0] if len(n.words) == 1 else '"' + " ".join(n.words) + '"')
    if n.kind == "range":
        lo = "*" if n.low is None else _bound(n.low, n.time)
        hi = "*" if n.high is None else _bound(n.high, n.time)
        return f"{f}{'[' if n.include_low else '{'}{lo} TO {hi}{']' if n.include_high else '}'}"
    if n.kind == "not":
        return f"NOT {_explain(n.children[0])}"
    if n.kind in ("and", "or"):
        return "(" + f" {n.kind.upper()} ".join(_explain(c) for c in n.children) + ")"
    parts = [f"+{_explain(c)}" for c in n.must]
    parts += [_explain(c) for c in n.should]
    parts += [f"-{_explain(c)}" for c in n.must_not]
    return "(" + " ".join(parts) + ")"


def _bound(v: float, time: bool) -> str:
    if time:
        return datetime.fromtimestamp(v / 1000.0, UTC).isoformat().replace("+00:00", "Z")
    return str(int(v)) if v.is_integer() else repr(v)


# ---------------------------------------------------------------------- events


class Doc:
    """An event analysed once for all the queries it meets: per field path (and ``""`` for
    all fields) its words, its values' word sequences (for phrases) and raw values."""

    __slots__ = ("words", "seqs", "values", "_times")

    def __init__(self, event: object):
        self.words: dict[str, set[str]] = {}
        self.seqs: dict[str, list[list[str]]] = {}
        self.values: dict[str, list[object]] = {}
        self._times: dict[str, list[float]] | None = None
        if isinstance(event, dict):
            self._walk(event, "")
        else:
            self._leaf("", event)

    def _walk(self, obj: dict, prefix: str) -> None:
        for k, v in obj.items():
            path = f"{prefix}{k}"
            if isinstance(v, dict):
                self._walk(v, path + ".")
            elif isinstance(v, list):
                for x in v:
                    if isinstance(x, dict):
                        self._walk(x, path + ".")
                    elif x is not None:
                        self._leaf(path, x)
            elif v is not None:
                self._leaf(path, v)

    def _leaf(self, path: str, v: object) -> None:
        if isinstance(v, str):
            ws = words(v)
        else:
            w = _scalar_word(v)
            ws = [] if w is None else [w]
        self.values.setdefault(path, []).append(v)
        for f in (path, "") if path else ("",):
            self.words.setdefault(f, set()).update(ws)
            if len(ws) > 1:
                self.seqs.setdefault(f, []).append(ws)

    def times(self, field: str) -> list[float]:
        if self._times is None:
            self._times = {}
        got = self._times.get(field)
        if got is None:
            got = []
            for v in self.values.get(field, ()):
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    got.append(float(v))
                elif isinstance(v, str):
                    t = _time(v)
                    if t is not None:
                        got.append(t)
            self._times[field] = got
        return got


def _in_range(n: Node, v: float) -> bool:
    if n.low is not None and (v < n.low or (v == n.low and not n.include_low)):
        return False
    if n.high is not None and (v > n.high or (v == n.high and not n.include_high)):
        return False
    return True


def _has_phrase(seqs: list[list[str]], phrase: tuple[str, ...]) -> bool:
    k = len(phrase)
    first = phrase[0]
    target = list(phrase)
    for seq in seqs:
        for i in range(len(seq) - k + 1):
            if seq[i] == first and seq[i : i + k] == target:
                return True
    return False


Matcher = Callable[[Doc], bool]


def compile_node(n: Node) -> Matcher:
    """A function of an analysed event saying whether `n` matches it."""
    kind = n.kind
    if kind == "all":
        return lambda d: True
    if kind == "exists":
        field = n.field
        return lambda d: field in d.values
    if kind == "term":
        field, ws = n.field, n.words
        if len(ws) == 1:
            w = ws[0]

            def term(d: Doc) -> bool:
                got = d.words.get(field)
                return got is not None and w in got

            return term

        def phrase(d: Doc) -> bool:
            got = d.words.get(field)
            if got is None or any(x not in got for x in ws):
                return False
            return _has_phrase(d.seqs.get(field, ()), ws)

        return phrase
    if kind == "range":
        field = n.field
        if n.time:
            return lambda d: any(_in_range(n, t) for t in d.times(field))

        def num_range(d: Doc) -> bool:
            for v in d.values.get(field, ()):
                if isinstance(v, bool):
                    continue
                x = v if isinstance(v, (int, float)) else _number(v) if isinstance(v, str) else None
                if x is not None and _in_range(n, x):
                    return True
            return False

        return num_range
    if kind == "not":
        inner = compile_node(n.children[0])
        return lambda d: not inner(d)
    if kind == "and":
        parts = tuple(compile_node(c) for c in n.children)
        if len(parts) == 2:  # the common case, without a generator per call
            a, b = parts
            return lambda d: a(d) and b(d)

        def all_of(d: Doc) -> bool:
            for p in parts:
                if not p(d):
                    return False
            return True

        return all_of
    if kind == "or":
        parts = tuple(compile_node(c) for c in n.children)
        if len(parts) == 2:
            a, b = parts
            return lambda d: a(d) or b(d)

        def any_of(d: Doc) -> bool:
            for p in parts:
                if p(d):
                    return True
            return False

        return any_of
    must = tuple(compile_node(c) for c in n.must)
    should = tuple(compile_node(c) for c in n.should)
    must_not = tuple(compile_node(c) for c in n.must_not)
    need_should = bool(should) and not must

    def clauses(d: Doc) -> bool:
        if not all(p(d) for p in must) or any(p(d) for p in must_not):
            return False
        return not need_should or any(p(d) for p in should)

    return clauses


# ---------------------------------------------------------------------- the index

Key = tuple[str, str | None]  # (field, word), or (field, None): the field is present


def index_keys(n: Node, size: Callable[[Key], int] | None = None) -> frozenset[Key] | None:
    """Keys at least one of which every event matching `n` contains; None: no such set.
    `size` (how many live queries use a key) steers the choice towards rarer keys: of a
    phrase's words the one fewest queries use (then the longest), of an AND's children the
    key set fewest queries use."""
    size = size or _no_size
    kind = n.kind
    if kind == "term":
        field = n.field
        return frozenset({(field, min(n.words, key=lambda w: (size((field, w)), -len(w))))})
    if kind in ("range", "exists"):
        return frozenset({(n.field, None)})
    if kind in ("all", "not"):
        return None
    if kind == "or":
        out: set[Key] = set()
        for c in n.children:
            ks = index_keys(c, size)
            if ks is None:
                return None
            out |= ks
        return frozenset(out)
    if kind == "and":
        return _best((index_keys(c, size) for c in n.children), size)
    # bool: a required clause suffices; without one, some should clause must match
    if n.must:
        return _best((index_keys(c, size) for c in n.must), size)
    if n.should:
        return index_keys(Node("or", children=n.should), size)
    return None


def _term_keys(n: Node):
    """Every (field, word) of `n`'s terms and phrases."""
    if n.kind == "term":
        for w in n.words:
            yield (n.field, w)
    for c in (*n.children, *n.must, *n.should, *n.must_not):
        yield from _term_keys(c)


def _no_size(key: Key) -> int:
    return 0


def _best(sets, size: Callable[[Key], int]) -> frozenset[Key] | None:
    best = None
    best_cost = None
    for ks in sets:
        if ks is None:
            continue
        # presence keys are weak filters (most events have the field): word keys first
        cost = (sum(1 for _, w in ks if w is None), sum(size(k) for k in ks), len(ks))
        if best_cost is None or cost < best_cost:
            best, best_cost = ks, cost
    return best


def _sure(n: Node) -> bool:
    """Whether an event that has one of `n`'s index keys surely matches `n`: `n` is one word
    (its key is that word in that field, exactly what the term checks), or an OR of such
    (``message:a OR message:b``; Lucene clauses without an operator, none required or
    prohibited). Such a query needs no evaluation once the index found it."""
    if n.kind == "term":
        return len(n.words) == 1
    if n.kind == "or":
        return all(_sure(c) for c in n.children)
    if n.kind == "bool":
        return not n.must and not n.must_not and bool(n.should) and all(map(_sure, n.should))
    return False


@dataclass
class Query:
    id: str
    text: str
    node: Node
    matcher: Matcher
    keys: frozenset[Key] | None  # None: on the always-check list


def compile_query(qid: str, text: str) -> Query:
    node = parse(text)
    return Query(qid, text, node, compile_node(node), index_keys(node))


def query_text(value: object) -> str:
    """The query of a record value: a string or ``{"query": text, ...}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("query"), str):
        return value["query"]
    raise QueryError('a saved search is a string or {"query": "..."}', 0, repr(value)[:200])


class QuerySerde:
    """Values of a queries topic: JSON (``"text"`` or ``{"query": text, ...}``), or else the
    bytes as the query text itself. Never raises on read: a record that is no query is kept
    in ``QueryIndex.errors`` rather than stopping the job (as a bad event would)."""

    def serialize(self, obj: object) -> bytes | None:
        return None if obj is None else json.dumps(obj, separators=(",", ":")).encode()

    def deserialize(self, data: bytes | None) -> object:
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return data.decode("utf-8", errors="replace")


QUERIES = QuerySerde()


class QueryIndex:
    """The live queries of one task, indexed by their keys (see the module docstring)."""

    def __init__(self, topic: str | None = None) -> None:
        self.topic = topic  # set: records naming another topic ({"topic": ...}) are not ours
        self.queries: dict[str, Query] = {}
        # field -> word (None: present) -> ids
        self.postings: dict[str, dict[str | None, set[str]]] = {}
        self.always: set[str] = set()
        self.errors: dict[str, str] = {}  # id -> why its latest record did not parse
        self._df: dict[Key, int] = {}  # (field, word) -> live queries using it (anywhere)
        self._matchers: dict[str, Matcher] = {}
        # ids of the queries an event matches whenever it has one of their keys (see `_sure`)
        self.exact: set[str] = set()

    def __len__(self) -> int:
        return len(self.queries)

    def put(self, qid: str, value: object) -> None:
        """Add, change (``value`` a query) or delete (``value`` None) the query `qid`."""
        self.delete(qid)
        if value is None:
            return
        if self.topic is not None and isinstance(value, dict):
            if value.get("topic") not in (None, self.topic):
                return
        try:
            q = compile_query(qid, query_text(value))
        except QueryError as exc:
            self.errors[qid] = str(exc)
            return
        self._count(q.node, 1)
        q.keys = index_keys(q.node, self._size)
        self.queries[qid] = q
        self._matchers[qid] = q.matcher
        if q.keys is None:
            self.always.add(qid)
        else:
            if _sure(q.node):
                self.exact.add(qid)
            for field, word in q.keys:
                self.postings.setdefault(field, {}).setdefault(word, set()).add(qid)

    def _size(self, key: Key) -> int:
        return self._df.get(key, 0)

    def _count(self, node: Node, delta: int) -> None:
        """Count the query's words (per field) in ``_df``: how many live queries use each."""
        for key in _term_keys(node):
            n = self._df.get(key, 0) + delta
            if n > 0:
                self._df[key] = n
            else:
                self._df.pop(key, None)

    def delete(self, qid: str) -> None:
        self.errors.pop(qid, None)
        q = self.queries.pop(qid, None)
        if q is None:
            return
        del self._matchers[qid]
        self.exact.discard(qid)
        self._count(q.node, -1)
        if q.keys is None:
            self.always.discard(qid)
            return
        for field, word in q.keys:
            by_word = self.postings[field]
            ids = by_word[word]
            ids.discard(qid)
            if not ids:
                del by_word[word]
                if not by_word:
                    del self.postings[field]

    def candidates(self, doc: Doc) -> set[str]:
        """The queries worth evaluating on `doc`: those with a key in it, and the always-check
        list."""
        out = set(self.always)
        postings = self.postings
        for field, ws in doc.words.items():
            by_word = postings.get(field)
            if by_word is None:
                continue
            if len(ws) < len(by_word):
                for w in ws:
                    ids = by_word.get(w)
                    if ids:
                        out |= ids
            else:
                for w, ids in by_word.items():
                    if w in ws:
                        out |= ids
            if field and None in by_word:  # every field present has an entry in doc.words
                out |= by_word[None]
        return out

    def match(self, event: object) -> list[str]:
        """Ids of the live queries `event` matches, sorted."""
        doc = Doc(event)
        matchers, sure = self._matchers, self.exact
        return sorted([qid for qid in self.candidates(doc) if qid in sure or matchers[qid](doc)])

    def describe(self) -> dict:
        return {
            "queries": len(self.queries),
            "always_checked": len(self.always),
            "indexed_fields": len(self.postings),
            "invalid": dict(self.errors),
        }


def brute_force_match(queries: dict[str, str], event: object) -> list[str]:
    """Every query evaluated on `event` (the oracle the tests check the index against)."""
    doc = Doc(event)
    return sorted(qid for qid, text in queries.items() if compile_node(parse(text))(doc))


__all__ = [
    "Doc",
    "Node",
    "Query",
    "QueryError",
    "QueryIndex",
    "brute_force_match",
    "compile_query",
    "explain",
    "index_keys",
    "parse",
    "query_text",
    "words",
]
