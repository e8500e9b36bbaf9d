"""The ASGI entry point served by Daphne (`manage.py runserver` or the `daphne` command).

Loading it starts the process-wide broker, so the data directory is locked and demo traffic
flows from the moment the server starts, not from the first request; the broker is closed at
interpreter exit (see `brokerui.broker`). With TIDELOG_CLUSTER set, no local broker is opened:
the saved metric panels run over the external cluster instead (see `brokerui.cluster`).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brokerui.settings")

from brokerui.routing import build_application  # noqa: E402

application = build_application()

from brokerui.broker import get_broker  # noqa: E402
from brokerui.cluster import has_builtin  # noqa: E402
from streams.errors import DataDirLocked  # noqa: E402
from streams.schemas.server import RegistryPortUnavailable  # noqa: E402

# Without the built-in broker among the clusters the console is only a client: none is opened.
if has_builtin():
    try:
        from brokerui.broker import kafka_listener_summary, registry_summary

        print(f"tidelog: {kafka_listener_summary(get_broker())}", flush=True)
        print(f"tidelog: {registry_summary(get_broker())}", flush=True)
    except DataDirLocked as exc:  # a second server on the same data: say so, no traceback
        raise SystemExit(f"tidelog: {exc}") from None
    except RegistryPortUnavailable as exc:  # a local schema registry on 8081, say
        from django.conf import settings

        raise SystemExit(
            f"tidelog: cannot serve the schema registry on 127.0.0.1:"
            f"{settings.TIDELOG_REGISTRY_PORT}: {exc.strerror or exc}. Choose another port "
            "with TIDELOG_REGISTRY_PORT=… or run without it with TIDELOG_REGISTRY=0."
        ) from None
    except OSError as exc:  # the Kafka listener's port is taken (a local Kafka, say)
        from django.conf import settings

        raise SystemExit(
            f"tidelog: cannot start the Kafka listener on 127.0.0.1:"
            f"{settings.TIDELOG_KAFKA_PORT}: {exc.strerror or exc}. Choose another port with "
            "TIDELOG_KAFKA_PORT=… or run without it with TIDELOG_KAFKA_LISTENER=0."
        ) from None

from brokerui.console.live.services import start_saved_panels  # noqa: E402

# users' metric panels run from start-up (on the built-in broker or the external cluster), not
# only once their page is open
start_saved_panels()

from streams.gcsettings import settle_gc  # noqa: E402

# the server is up (apps loaded, broker and embedded jobs started): as every process that moves
# records, it freezes what is alive now and collects young cycles less often
settle_gc()
