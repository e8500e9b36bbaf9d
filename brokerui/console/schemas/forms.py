"""The Schemas pages' forms: registering a version, a subject's level, a typed confirmation."""

from __future__ import annotations

from django import forms

from streams.schemas.registry import LEVELS

MAX_SCHEMA_CHARS = 1_000_000  # the REST API takes what fits a request; a page, a megabyte

TYPE_CHOICES = [("AVRO", "Avro"), ("PROTOBUF", "Protobuf"), ("JSON", "JSON Schema")]


def register_values(data) -> dict:
    """What the register form sent, as the services take it (each field cut to its limit; an
    unknown type is the check's to report)."""
    return {
        "subject": str(data.get("subject", ""))[:1000].strip(),
        "schema": str(data.get("schema", ""))[:MAX_SCHEMA_CHARS],
        "schema_type": str(data.get("schema_type") or "AVRO")[:20].upper(),
        "references": str(data.get("references", ""))[:100_000],
    }


class LevelForm(forms.Form):
    level = forms.ChoiceField(  # "": follow the global level
        choices=[("", "global"), *((lv, lv) for lv in LEVELS)], required=False
    )


class ConfirmForm(forms.Form):
    confirm = forms.CharField(max_length=3000, strip=True, required=True)

    def __init__(self, *args, expected: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.expected = expected

    def clean_confirm(self) -> str:
        typed = self.cleaned_data["confirm"]
        if typed != self.expected:
            raise forms.ValidationError(
                f"type {self.expected!r} exactly to confirm; you typed {typed!r}"
            )
        return typed


MAX_DESCRIPTOR_SET_BYTES = 4 * 1024 * 1024


def mapping_request(data, files):
    """The mapping form as ``brokerui.console.schemas.mappings.MappingRequest`` (each field cut
    to its limit; an upload over its limit is refused by the service, by size)."""
    from brokerui.console.schemas.mappings import MappingRequest

    upload = files.get("descriptor_set")
    raw = upload.read(MAX_DESCRIPTOR_SET_BYTES + 1) if upload is not None else None
    return MappingRequest(
        part=str(data.get("part", "value"))[:10],
        source=str(data.get("source", "registry"))[:20],
        subject=str(data.get("subject", ""))[:1000].strip(),
        version=str(data.get("version", "latest"))[:20].strip() or "latest",
        message=str(data.get("message", ""))[:1000].strip(),
        schema=str(data.get("schema", ""))[:MAX_SCHEMA_CHARS],
        descriptor_set=raw,
        file_name=(upload.name if upload is not None else "")[:300],
    )
