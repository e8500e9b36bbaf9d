"""Conditions on an event's fields that a step can read and compile: ``field("type") ==
"search"``.

``field(name)`` (``streams.jobs.field``) is a ``Field``: called on a value it reads that field
(a timestamp or key extractor, as before), and compared with a constant it gives a ``Cond``,
a condition on events::

    field("type") == "search"
    (field("type") == "click") & (field("price") >= 100)
    field("type").isin(["click", "view"]) | ~(field("country") == "NL")
    field("user", "plan") == "pro"        # a nested field: event["user"]["plan"]

A ``Cond`` is a function of one event (``cond(event) -> bool``), so it goes wherever a
condition may, and it also says what it computes, so a step can compile it: a CEP pattern
whose conditions are all ``Cond`` and which is a chain (``begin`` then ``followed_by``
stages) runs a matcher generated for it, the conditions written into its code
(``streams.jobs.cep``). A plain Python function stays the way to say anything else
(conditions that look at the events matched so far).

Rules (the same whether compiled or called):

- a field is read from a ``dict`` event (``event.get(name)``); a missing field, or an event
  that is not a ``Mapping``, reads as ``None`` (so ``field("q") == "x"`` is false on an event
  without ``q``, and ``field("q") == None`` true);
- ``<``, ``<=``, ``>``, ``>=`` are false when the field is ``None``; otherwise Python's
  comparison (comparing a string with a number raises ``TypeError``, as in a function);
- ``isin(values)``: ``event[field] in values`` (values given as any iterable; hashable ones
  are kept in a frozenset);
- ``&``, ``|``, ``~``: and, or, not (Python's ``and`` / ``or`` / ``not`` cannot be overloaded:
  using them on a condition raises ``TypeError`` saying so, as ``x in [field(...)]`` does).

Constants are kept by value at construction: later changes to a list given to ``isin`` do not
change the condition.

Thread-safety: conditions are immutable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

__all__ = ["Cond", "Field", "field", "read_field"]

_LITERALS = (str, int, bool, type(None))  # repr() gives them back exactly


def read_field(value: object, path: tuple[str, ...]) -> object:
    """The field at `path` of `value` (nested mappings), or ``None`` where one is missing."""
    for name in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


class Field:
    """``field("a")`` / ``field("a", "b")``: a field of a value; compare it to get a ``Cond``.

    Called on a value, it returns the field (``value["a"]``) and raises ``SerdeError`` when the
    value has none: what the timestamp and key extractors need.
    """

    __slots__ = ("path",)
    __hash__ = object.__hash__  # __eq__ builds a condition

    def __init__(self, *path: str):
        if not path or not all(isinstance(p, str) and p for p in path):
            from streams.errors import InvalidConfig

            raise InvalidConfig("field", path, "names a field by one or more non-empty strings")
        self.path = path

    def __call__(self, value: object) -> object:
        try:
            for name in self.path:
                value = value[name]  # type: ignore[index]
        except (KeyError, TypeError, IndexError) as exc:
            from streams.jobs.serde import SerdeError  # serde imports this module

            raise SerdeError(
                f"the value has no field {'.'.join(self.path)!r}: {value!r:.200}"
            ) from exc
        return value

    def __repr__(self) -> str:
        return "field(" + ", ".join(map(repr, self.path)) + ")"

    def __eq__(self, other: object) -> Cond:  # type: ignore[override]
        return _Compare(self.path, "==", other)

    def __ne__(self, other: object) -> Cond:  # type: ignore[override]
        return _Compare(self.path, "!=", other)

    def __lt__(self, other: object) -> Cond:
        return _Compare(self.path, "<", other)

    def __le__(self, other: object) -> Cond:
        return _Compare(self.path, "<=", other)

    def __gt__(self, other: object) -> Cond:
        return _Compare(self.path, ">", other)

    def __ge__(self, other: object) -> Cond:
        return _Compare(self.path, ">=", other)

    def isin(self, values: Iterable) -> Cond:
        """True when the field's value is one of `values`."""
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            from streams.errors import InvalidConfig

            raise InvalidConfig("isin", values, "takes a list or set of values")
        items = list(values)
        try:
            held: object = frozenset(items)
        except TypeError:  # unhashable values: a tuple, compared one by one
            held = tuple(items)
        return _Compare(self.path, "in", held)

    def __bool__(self) -> bool:
        raise TypeError(f"{self!r} is not a condition: compare it (field(...) == value)")


def field(*path: str) -> Field:
    """A field of a value (``field("ts")``, nested: ``field("user", "id")``); see the module
    docstring."""
    return Field(*path)


class Cond:
    """A condition on one event, that can be called and compiled (see the module docstring).

    ``source(env)`` gives a Python expression over the local variables ``env.var(path)``
    (each field read once, by ``Env.prelude``) and names of constants in ``env.consts``.
    """

    _fn = None

    def __call__(self, event: object) -> bool:
        return self.function()(event)

    def function(self) -> Callable[[object], bool]:
        """The condition as a plain function (compiled once): cheaper to call than the
        condition object itself."""
        fn = self._fn
        if fn is None:
            fn = self._fn = compile_conds([self])[0]
        return fn

    def source(self, env: Env) -> str:
        raise NotImplementedError

    def __and__(self, other: Cond) -> Cond:
        return _Bool("and", (self, _cond(other)))

    def __or__(self, other: Cond) -> Cond:
        return _Bool("or", (self, _cond(other)))

    def __invert__(self) -> Cond:
        return _Not(self)

    def __bool__(self) -> bool:
        raise TypeError(
            f"{self!r} is a condition, not a truth value: combine conditions with & | ~ "
            "(not and / or / not), and test membership with field(...).isin(values)"
        )


def _cond(other: object) -> Cond:
    if not isinstance(other, Cond):
        raise TypeError(f"{other!r} is not a condition (field(...) == value)")
    return other


class _Compare(Cond):
    def __init__(self, path: tuple[str, ...], op: str, value: object):
        self.path, self.op, self.value = path, op, value

    def __repr__(self) -> str:
        name = "field(" + ", ".join(map(repr, self.path)) + ")"
        if self.op == "in":
            return f"{name}.isin({sorted(self.value, key=repr)!r})"  # type: ignore[call-overload]
        return f"({name} {self.op} {self.value!r})"

    def source(self, env: Env) -> str:
        var, const = env.var(self.path), env.const(self.value)
        if self.op in ("<", "<=", ">", ">="):
            return f"({var} is not None and {var} {self.op} {const})"
        return f"({var} {self.op} {const})"


class _Bool(Cond):
    def __init__(self, op: str, parts: tuple[Cond, ...]):
        self.op, self.parts = op, parts

    def __repr__(self) -> str:
        sym = " & " if self.op == "and" else " | "
        return "(" + sym.join(map(repr, self.parts)) + ")"

    def source(self, env: Env) -> str:
        return "(" + f" {self.op} ".join(p.source(env) for p in self.parts) + ")"


class _Not(Cond):
    def __init__(self, part: Cond):
        self.part = part

    def __repr__(self) -> str:
        return f"~{self.part!r}"

    def source(self, env: Env) -> str:
        return f"(not {self.part.source(env)})"


class Env:
    """The names generated code uses: a local per field read, a global per constant that
    ``repr`` would not give back exactly (``ns`` holds them, and ``read_field``)."""

    def __init__(self, event: str = "value"):
        self.event = event
        self.fields: dict[tuple[str, ...], str] = {}
        self.ns: dict[str, object] = {"_read_field": read_field, "_dict": dict}

    def var(self, path: tuple[str, ...]) -> str:
        got = self.fields.get(path)
        if got is None:
            got = self.fields[path] = f"_f{len(self.fields)}"
        return got

    def const(self, value: object) -> str:
        if type(value) in _LITERALS or (type(value) is float and math.isfinite(value)):
            return repr(value)
        name = f"_k{len(self.ns)}"
        self.ns[name] = value
        return name

    def prelude(self, indent: str) -> str:
        """Statements reading each field once into its local."""
        e = self.event
        lines = []
        for path, var in self.fields.items():
            if len(path) == 1:
                lines.append(
                    f"{var} = {e}.get({path[0]!r}) if {e}.__class__ is _dict "
                    f"else _read_field({e}, {path!r})"
                )
            else:
                lines.append(f"{var} = _read_field({e}, {path!r})")
        return "".join(f"{indent}{line}\n" for line in lines)


def compile_conds(conds: list[Cond]) -> list:
    """A function ``f(event) -> bool`` per condition (each reads its fields once)."""
    out = []
    for c in conds:
        env = Env("e")
        expr = c.source(env)
        src = f"def cond(e):\n{env.prelude('    ')}    return {expr}\n"
        ns = dict(env.ns)
        exec(compile(src, f"<condition {c!r:.80}>", "exec"), ns)  # noqa: S102 - our own source
        out.append(ns["cond"])
    return out
