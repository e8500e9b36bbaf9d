"""Worked examples that ship with Tidelog (each tested under tests/)."""
