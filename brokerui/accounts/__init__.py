"""Users' own account pages: log in and out, change the password, create and revoke the API
token; and what the login throttle (django-axes) reports: failures logged and audited."""
