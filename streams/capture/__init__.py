"""Change data capture: a database's committed changes into compacted topics, in commit order.

`python -m streams.capture postgres --dsn ... --tables ... --bootstrap HOST:PORT`; see
`streams.capture.postgres` for the guarantees and `streams.capture.pgoutput` for the decoder.
"""
