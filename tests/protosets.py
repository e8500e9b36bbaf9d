"""Protobuf descriptor sets for tests, made as a user makes one: grpcio-tools' protoc with
``--include_imports --descriptor_set_out`` (well-known types from its bundled include dir)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def compile_descriptor_set(directory: Path, files: dict[str, str], root: str) -> Path:
    """Write `files` (import path -> .proto text) under `directory` and compile `root` with
    its imports into ``<root>.desc`` there; returns that file."""
    import grpc_tools

    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    out = directory / (Path(root).stem + ".desc")
    include = Path(grpc_tools.__file__).parent / "_proto"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"--proto_path={directory}",
            f"--proto_path={include}",
            "--include_imports",
            f"--descriptor_set_out={out}",
            root,
        ],
        check=True,
        capture_output=True,
    )
    return out


def message_class(data: bytes, full_name: str):
    """The generated class of message type `full_name` in a serialized descriptor set."""
    from google.protobuf import message_factory

    from streams.schemas.wire import descriptor_set_pool

    pool, _ = descriptor_set_pool(data)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
