"""Topic services the command line uses: verifying and repairing the log on disk.

``log_verify`` is what ``manage.py verify_log`` calls. It opens the data directory itself (the
directory has one owner at a time, so the server must be stopped: a running one is reported
with its pid), runs the engine's deep verification (``streams.log.verify``) and, when asked,
its repair; every partition repaired is written to the audit log (source ``cli``, by the
operating-system user), as the console's changes are.
"""

from __future__ import annotations

import getpass

from brokerui.audit.services import AuditLog, record
from streams.log import LogStore
from streams.log.verify import VerifyReport, verify_store


def log_verify(*, data_dir, topic: str | None = None, repair: bool = False) -> VerifyReport:
    """Verify every partition (of `topic`), repairing when `repair`; raises TidelogError
    (DataDirLocked while the server runs, UnknownTopic)."""
    store = LogStore.open(str(data_dir), background=False)
    try:
        if topic is not None:
            store.partition_count(topic)  # UnknownTopic before anything is read
        report = verify_store(store, topic=topic, repair=repair)
        for p in report.partitions:
            if p.repaired:
                _audit_repair(store, p)
        return report
    finally:
        store.close()


def _audit_repair(store: LogStore, p) -> None:
    cut = [
        {
            "file": r.file,
            "bytes": [r.start, r.end],
            "offsets": [r.first_offset, r.end_offset],
            "reason": r.reason,
        }
        for r in p.repaired
    ]
    record(
        None,
        "log.repair",
        f"topic {p.topic} partition {p.partition}",
        before={"damaged": cut},
        after={
            "offsets_lost": sum(r.offset_count for r in p.repaired),
            "bytes_cut": sum(r.byte_count for r in p.repaired),
        },
        source="cli",
        who=f"cli:{getpass.getuser()}",
        sink=AuditLog(store),
    )
