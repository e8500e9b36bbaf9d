"""The offset reset form: a scope and a strategy, turned into the engine's ResetStrategy and
one ResetScope per topic (chosen partitions may span topics; the engine's scope is one topic)."""

from __future__ import annotations

import csv
import io

from django import forms

from streams.errors import InvalidResetSpec
from streams.groups import ResetScope, ResetStrategy
from streams.groups.reset import parse_datetime_ms, parse_duration_ms, parse_offsets_csv

MAX_FILE_BYTES = 1 << 20
MAX_OFFSET = (1 << 63) - 1  # Kafka offsets are int64

SCOPES = [
    ("all", "All topics of the group"),
    ("topic", "One topic"),
    ("partitions", "Chosen partitions"),
]

STRATEGIES = [
    ("to-earliest", "Earliest", "the oldest record still in the log (log start)"),
    ("to-latest", "Latest", "the log end: skip everything not yet consumed"),
    ("to-current", "Current", "keep the committed offset; partitions without one get the end"),
    ("to-offset", "Offset", "one offset for every partition in scope"),
    ("shift-by", "Shift by", "move the committed offset forward (+N) or back (−N)"),
    ("to-datetime", "Date and time", "the first record at or after a moment (UTC)"),
    ("by-duration", "Duration ago", "the first record at or after now minus a duration"),
    ("from-file", "From file", "a CSV of topic,partition,offset lines"),
]

DURATION_PRESETS = [
    ("PT5M", "5 min"),
    ("PT15M", "15 min"),
    ("PT1H", "1 h"),
    ("PT6H", "6 h"),
    ("PT12H", "12 h"),
    ("P1D", "1 day"),
    ("P7D", "7 days"),
]


def _offsets_text(text: str, group_id: str) -> str:
    """The engine reads ``topic,partition,offset`` lines. Two more shapes are accepted here:

    * this console's own plan export, whose header names a ``new_offset`` column (the engine
      would read the third column, which there is the *current* offset);
    * Kafka's multi-group export ``group,topic,partition,offset``: this group's lines are kept.
    """
    rows = [r for r in csv.reader(io.StringIO(text)) if r and "".join(r).strip()]
    header = [c.strip().lower() for c in rows[0]] if rows else []
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    if "new_offset" in header and "topic" in header and "partition" in header:
        t, p, o = header.index("topic"), header.index("partition"), header.index("new_offset")
        for row in rows[1:]:
            if len(row) > max(t, p, o):
                w.writerow([row[t], row[p], row[o]])
        return out.getvalue()
    data = [r for r in rows if not r[0].startswith("#")]
    if data and all(len(r) == 4 for r in data):
        if header[:2] == ["group", "topic"]:
            data = data[1:]
        mine = [r[1:] for r in data if r[0].strip() == group_id]
        if not mine:
            raise InvalidResetSpec(
                f"the file has group,topic,partition,offset lines but none for {group_id!r}"
            )
        w.writerows(mine)
        return out.getvalue()
    return text


class ResetForm(forms.Form):
    scope = forms.ChoiceField(choices=SCOPES, initial="all", widget=forms.RadioSelect)
    topic = forms.ChoiceField(required=False)
    partitions = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    strategy = forms.ChoiceField(
        choices=[(k, label) for k, label, _ in STRATEGIES],
        initial="to-earliest",
        widget=forms.RadioSelect,
    )
    offset = forms.IntegerField(required=False, min_value=0, max_value=MAX_OFFSET)
    shift = forms.IntegerField(required=False, min_value=-MAX_OFFSET, max_value=MAX_OFFSET)
    datetime = forms.CharField(required=False)
    duration = forms.CharField(required=False, max_length=40)
    file = forms.FileField(required=False)
    csv_text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}))

    def __init__(
        self,
        *args,
        group_id: str,
        topics: list[str],
        partitions: list[tuple[str, int]],
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.group_id = group_id
        self.fields["topic"].choices = [("", "—")] + [(t, t) for t in topics]
        self.fields["partitions"].choices = [(f"{t}:{p}", f"{t}-{p}") for t, p in partitions]

    # -------------------------------------------------------------------- cleaning

    def clean(self):
        data = super().clean()
        kind = data.get("strategy")
        value_fields = ("file", "csv_text") if kind == "from-file" else (self._value_field(kind),)
        if kind and not any(f in self.errors for f in value_fields):  # no second message
            try:
                data["reset_strategy"] = self._strategy(kind, data)
            except InvalidResetSpec as exc:
                self.add_error(self._value_field(kind), str(exc))
        if kind != "from-file":  # the file names its partitions; the scope is not used
            scopes = self._scopes(data)
            if scopes is not None:
                data["reset_scopes"] = scopes
        else:
            data["reset_scopes"] = [ResetScope(all_topics=True)]
        return data

    @staticmethod
    def _value_field(kind: str) -> str | None:
        return {
            "to-offset": "offset",
            "shift-by": "shift",
            "to-datetime": "datetime",
            "by-duration": "duration",
            "from-file": "file",
        }.get(kind)

    def _strategy(self, kind: str, data) -> ResetStrategy:
        if kind == "to-offset":
            if data.get("offset") is None:
                raise InvalidResetSpec("give the offset to move every partition to (0 or more)")
            return ResetStrategy(kind, data["offset"])
        if kind == "shift-by":
            if data.get("shift") is None:
                raise InvalidResetSpec(
                    "give how many records to shift by: negative to replay, positive to skip"
                )
            return ResetStrategy(kind, data["shift"])
        if kind == "to-datetime":
            if not data.get("datetime"):
                raise InvalidResetSpec("choose a date and time (UTC)")
            return ResetStrategy(kind, parse_datetime_ms(data["datetime"]))
        if kind == "by-duration":
            if not data.get("duration"):
                raise InvalidResetSpec("give a duration such as PT1H, PT30M or P1D")
            return ResetStrategy(kind, parse_duration_ms(data["duration"]))
        if kind == "from-file":
            upload = data.get("file")
            if upload is not None:
                if upload.size > MAX_FILE_BYTES:
                    raise InvalidResetSpec(
                        f"the file is {upload.size:,} bytes; the limit is {MAX_FILE_BYTES:,}"
                    )
                try:
                    text = upload.read().decode("utf-8-sig")
                except UnicodeDecodeError:
                    raise InvalidResetSpec(
                        "the file is not UTF-8 text (a CSV was expected)"
                    ) from None
            else:
                text = data.get("csv_text") or ""
            if not text.strip():
                raise InvalidResetSpec(
                    "upload a CSV file (or paste its lines) of topic,partition,offset"
                )
            return ResetStrategy(kind, parse_offsets_csv(_offsets_text(text, self.group_id)))
        return ResetStrategy.parse(kind)

    def _scopes(self, data) -> list[ResetScope] | None:
        scope = data.get("scope")
        if scope == "all":
            return [ResetScope(all_topics=True)]
        if scope == "topic":
            if not data.get("topic"):
                self.add_error("topic", "choose the topic to reset")
                return None
            return [ResetScope(topic=data["topic"])]
        if scope == "partitions":
            chosen = data.get("partitions") or []
            if not chosen:
                self.add_error("partitions", "tick at least one partition")
                return None
            by_topic: dict[str, list[int]] = {}
            for item in chosen:
                topic, _, p = item.rpartition(":")
                by_topic.setdefault(topic, []).append(int(p))
            return [ResetScope(topic=t, partitions=tuple(sorted(ps))) for t, ps in by_topic.items()]
        return None

    # -------------------------------------------------------------------- display

    def scope_label(self) -> str:
        data = self.cleaned_data
        if data.get("strategy") == "from-file":
            return "the partitions named in the file"
        scope = data.get("scope")
        if scope == "all":
            return "all topics the group has offsets for"
        if scope == "topic":
            return f"topic {data.get('topic')}"
        return "partitions " + ", ".join(
            f"{t}-{p}" for t, _, p in (x.rpartition(":") for x in data.get("partitions", []))
        )

    def strategy_label(self) -> str:
        data = self.cleaned_data
        kind = data["strategy"]
        if kind == "to-offset":
            return f"to offset {data['offset']:,}"
        if kind == "shift-by":
            return f"shift by {data['shift']:+,}"
        if kind == "to-datetime":
            return f"to {data['datetime'].replace('T', ' ')} UTC"
        if kind == "by-duration":
            return f"by duration {data['duration'].strip().upper()} (back from now)"
        if kind == "from-file":
            n = len(data["reset_strategy"].value)
            return f"from file ({n} partition{'s' if n != 1 else ''})"
        return {
            "to-earliest": "to earliest",
            "to-latest": "to latest",
            "to-current": "to current",
        }[kind]
