"""The alert rule form: minutes for durations, the engine (`AlertRule.validated`) the only
judge of a rule; its errors are shown next to the field they name."""

from __future__ import annotations

from decimal import Decimal

from django import forms

from streams.alerts import AlertRule
from streams.errors import InvalidAlertRule

SCOPES = [("group", "a consumer group"), ("topic", "a topic")]
CONDITIONS = [
    ("status", "status (Burrow's rules) is at least…"),
    ("lag", "lag above a number of records"),
    ("lag_age", "lag above an age (oldest unconsumed record, seconds)"),
    ("no_input", "no records in (topic only)"),
]
FORMATS = [("json", "generic JSON"), ("slack", 'Slack-compatible {"text": …}')]
FIELD_OF = {"for_s": "for_min"}


class AlertRuleForm(forms.Form):
    name = forms.CharField(max_length=80)
    scope = forms.ChoiceField(choices=SCOPES, initial="group")
    target = forms.CharField(
        max_length=249, label="Group or topic", help_text="The group id or topic name, exactly."
    )
    condition = forms.ChoiceField(choices=CONDITIONS, initial="status")
    threshold = forms.CharField(
        max_length=20,
        required=False,
        help_text="status: WARN, STALL, STOP, REWIND or ERR · lag: records · age: seconds "
        "· no records in: leave empty",
    )
    for_min = forms.DecimalField(
        label="For (minutes)",
        min_value=0,
        max_digits=8,
        decimal_places=2,
        initial=5,
        help_text="How long the condition must hold before the alert fires (for “no records "
        "in”: the quiet time).",
    )
    webhook_url = forms.CharField(
        max_length=2000, label="Webhook URL", help_text="http:// or https://; POSTed JSON."
    )
    webhook_format = forms.ChoiceField(choices=FORMATS, initial="json", label="Format")
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args, rule_id: str = "new", **kwargs):
        super().__init__(*args, **kwargs)
        self.rule_id = rule_id
        self.fields_for_rule: dict | None = None

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        fields = {
            "name": data["name"],
            "scope": data["scope"],
            "target": data["target"],
            "condition": data["condition"],
            "threshold": data.get("threshold") or "",
            "for_s": int(data["for_min"] * Decimal(60)),
            "webhook_url": data["webhook_url"],
            "webhook_format": data["webhook_format"],
            "enabled": bool(data.get("enabled")),
        }
        try:
            rule = AlertRule(id=self.rule_id, **fields).validated()
        except InvalidAlertRule as exc:
            self.add_error(FIELD_OF.get(exc.field, exc.field), str(exc))
        else:
            fields["threshold"] = rule.threshold
            self.fields_for_rule = fields
        return data


def initial_from_rule(rule: AlertRule) -> dict:
    data = rule.to_json()
    data["for_min"] = Decimal(rule.for_s) / 60
    return data
