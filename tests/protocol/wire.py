"""A bare Kafka protocol client for tests: kafka-python's message classes over a plain socket,
so a test controls every field (sequence numbers, acks, versions) and every byte."""

from __future__ import annotations

import socket
import struct

from streams.protocol import codec


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 30.0):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, api_key: int, version: int, **fields) -> int:
        """Send one request; returns its correlation id."""
        self._correlation += 1
        req = codec.request_class(api_key)[version](**fields)
        req.with_header(correlation_id=self._correlation, client_id="wire-test")
        self.sock.sendall(bytes(req.encode(header=True, framed=True)))
        return self._correlation

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exactly(4))[0]
        return self._recv_exactly(size)

    def recv(self, api_key: int, version: int):
        """The next response, decoded (checks nothing about its correlation id)."""
        frame = self.recv_frame()
        return codec.response_class(api_key)[version].decode(frame, header=True)

    def call(self, api_key: int, version: int, **fields):
        correlation = self.send(api_key, version, **fields)
        response = self.recv(api_key, version)
        assert response.header.correlation_id == correlation
        return response

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return bytes(buf)

    def is_closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
