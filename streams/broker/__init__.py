"""The broker runtime: the one owner of a data directory and its background work."""
