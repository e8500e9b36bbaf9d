"""First run: with no user at all, create `admin` (operator, superuser) with a random password
and print it once. Does nothing when any user exists. `make run` calls it after migrating."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from brokerui.kafkaport.services import scram_credentials_set


class Command(BaseCommand):
    help = "Create the first admin user with a random password when there is no user yet."

    def handle(self, *args, **options):
        User = get_user_model()
        if User.objects.exists():
            return
        password = secrets.token_urlsafe(12)
        user = User.objects.create_superuser("admin", password=password)
        user.groups.add(Group.objects.get_or_create(name="operator")[0])
        scram_credentials_set(user=user, password=password)  # SASL/SCRAM on the Kafka port
        bar = "=" * 64
        self.stdout.write(
            f"\n{bar}\n  First run: created user 'admin' with password  {password}\n"
            f"  It is shown only now. Change it with: python manage.py changepassword admin\n"
            f"{bar}\n"
        )
