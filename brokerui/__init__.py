"""The Django project: settings, URLs, the ASGI app and the web console."""
