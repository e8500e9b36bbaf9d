"""The metric panel form: what people type (seconds, dotted paths) to a `PanelSpec`.

`PanelSpec.validate()` is the only judge of a spec; the form converts seconds to milliseconds,
then attaches each engine error to the field it is about (by the error's ``field`` attribute or,
failing that, the spec field named in its message), so it shows next to that field.
"""

from __future__ import annotations

import re

from django import forms

from streams.errors import TidelogError

AGGREGATIONS = ["count", "sum", "min", "max", "mean", "p50", "p95", "p99"]
WINDOWS = [
    ("tumbling", "tumbling (fixed, back to back)"),
    ("hopping", "hopping (fixed size, overlapping by step)"),
    ("sliding", "sliding (events within size of each other)"),
    ("session", "session (closes after a gap)"),
]
SECONDS_FIELDS = {  # spec field (ms) -> form field (seconds)
    "size_ms": "size_s",
    "step_ms": "step_s",
    "gap_ms": "gap_s",
    "lateness_ms": "lateness_s",
    "out_of_orderness_ms": "out_of_orderness_s",
}
TEXT_FIELDS = ("topic", "aggregation", "value_field", "group_by", "window", "time_field")
FIELD_OF = {**SECONDS_FIELDS, **{f: f for f in TEXT_FIELDS}}


def _seconds(label: str, *, required: bool = False, initial=None, help_text: str = ""):
    return forms.DecimalField(
        label=label,
        required=required,
        initial=initial,
        min_value=0,
        max_digits=12,
        decimal_places=3,
        help_text=help_text,
    )


class PanelForm(forms.Form):
    name = forms.CharField(max_length=80)
    topic = forms.ChoiceField(choices=[])
    aggregation = forms.ChoiceField(choices=[(a, a) for a in AGGREGATIONS], initial="count")
    value_field = forms.CharField(
        required=False,
        max_length=200,
        help_text="Dotted path into the JSON value, e.g. total or order.amount (not for count).",
    )
    group_by = forms.CharField(
        required=False, max_length=200, help_text="Optional dotted path: one series per value."
    )
    window = forms.ChoiceField(choices=WINDOWS, initial="tumbling")
    size_s = _seconds("Window size (s)", required=True, initial=10)
    step_s = _seconds("Step (s)", help_text="Hopping windows: how far each window moves.")
    gap_s = _seconds("Gap (s)", help_text="Session windows: inactivity that closes a session.")
    time_field = forms.CharField(
        required=False,
        max_length=200,
        help_text="Dotted path of the event time (ms or ISO 8601); empty: processing time "
        "as the broker saw it (each record's append time).",
    )
    lateness_s = _seconds(
        "Allowed lateness (s)",
        initial=0,
        help_text="Late events still correct a closed window this long.",
    )
    out_of_orderness_s = _seconds(
        "Out-of-orderness (s)", initial=0, help_text="Watermark = max event time seen − this."
    )
    accept_partial = forms.BooleanField(
        required=False,
        label="Save anyway: records that do not fit are counted as unreadable and skipped",
    )

    def __init__(self, *args, topics: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["topic"].choices = [(t, t) for t in topics]
        self.spec = None
        self.offer_accept_partial = False  # shown after a check that some records fit

    def spec_fields(self):
        """The fields of the spec, in order (the "save anyway" box is shown on its own)."""
        return [f for f in self if f.name != "accept_partial"]

    def add_sample_problems(self, exc) -> None:
        """Show a `FieldsDoNotFit`'s reasons next to their fields; when every field fits some
        of the sampled records, offer to save anyway."""
        for problem in exc.problems:
            self.add_error(FIELD_OF.get(problem.field), problem.reason)
        self.offer_accept_partial = exc.partial

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            spec = build_spec(data)
            spec.validate()
        except TidelogError as exc:
            field = _field_for(exc)
            # next to its field, the engine's reason says enough ("needs a field to aggregate")
            reason = getattr(exc, "reason", None) if field else None
            self.add_error(field, reason or str(exc))
        except (TypeError, ValueError) as exc:
            self.add_error(None, str(exc))
        else:
            self.spec = spec
        return data


def build_spec(data: dict):
    from streams.processing.panels import PanelSpec

    values = {f: (data.get(f) or None) for f in TEXT_FIELDS}
    for spec_field, form_field in SECONDS_FIELDS.items():
        seconds = data.get(form_field)
        values[spec_field] = None if seconds is None else int(seconds * 1000)
    values["aggregation"] = data["aggregation"]
    values["window"] = data["window"]
    values["lateness_ms"] = values["lateness_ms"] or 0
    values["out_of_orderness_ms"] = values["out_of_orderness_ms"] or 0
    return PanelSpec.from_dict(values)


def initial_from_spec(name: str, spec: dict) -> dict:
    """The form's initial values for a saved panel."""
    initial = {"name": name, **{f: spec.get(f) or "" for f in TEXT_FIELDS}}
    for spec_field, form_field in SECONDS_FIELDS.items():
        ms = spec.get(spec_field)
        initial[form_field] = None if ms is None else ms / 1000
    return initial


def _field_for(exc: Exception) -> str | None:
    named = getattr(exc, "field", None) or getattr(exc, "key", None)
    if named in FIELD_OF:
        return FIELD_OF[named]
    for spec_field, form_field in FIELD_OF.items():
        if re.search(rf"\b{spec_field}\b", str(exc)):
            return form_field
    return None
