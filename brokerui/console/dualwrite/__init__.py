"""The dual-write race page: two writers updating a database and a search index directly,
beside the same writers going through the log (``streams.eventsourcing.dualwrite``)."""
