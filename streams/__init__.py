"""Tidelog's engine: the partitioned log store, consumer groups, protocol and processing.

This package is a library. It never imports Django, so it can be used (and tested) on its own.
"""
