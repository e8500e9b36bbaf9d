"""Live metrics in the console: charts pushed over WebSockets, and user-defined metric panels.

- `scopes`: which series a page shows and the Channels group that carries them;
- `relay`: hands what the broker's threads emit to the ASGI event loop, then to the groups;
- `consumers` / `routing`: the WebSocket endpoints (`/ws/metrics/`, `/ws/panels/<id>/`);
- `models`, `forms`, `services`, `views`, `urls`: saved panels, per user.
"""
