"""Saved searches: write a query, see it validated, save it, watch its matches arrive live."""
