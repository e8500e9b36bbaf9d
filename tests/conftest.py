"""Suite-wide pytest set-up."""

# Benchmarks run on demand (`make bench`), never as part of the test suite.
collect_ignore = ["bench"]
