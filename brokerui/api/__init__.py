"""The JSON API under ``/api/v1/`` (Django REST framework, OpenAPI by drf-spectacular)."""
