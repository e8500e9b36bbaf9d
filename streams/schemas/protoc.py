"""``.proto`` text to a ``FileDescriptorProto``, by protoc itself.

A hand-written ``.proto`` parser would be a second, subtly different Protobuf compiler; the
registry instead runs the real one, grpcio-tools' bundled protoc (``python -m
grpc_tools.protoc``), in a scratch directory. The schema's references reach it as a
``FileDescriptorSet`` (``--descriptor_set_in``), each file under its import path, so an
``import "other.proto";`` resolves to the registered subject version and not to anything on
disk; the well-known types (``google/protobuf/*.proto``) come from grpcio-tools' own include
directory. protoc's ``file:line:column: message`` errors become `ProtoSyntaxError`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from google.protobuf import descriptor_pb2

PROTOC_TIMEOUT_S = 30.0

_ERROR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<column>\d+): (?P<message>.+)$", re.M)


class ProtoSyntaxError(ValueError):
    """protoc refused the text; `line` and `column` (1-based) say where, when it said."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


def _include_dir() -> str:
    import grpc_tools

    return str(Path(grpc_tools.__file__).parent / "_proto")


def file_descriptor_from_proto_text(
    text: str,
    deps: Mapping[str, descriptor_pb2.FileDescriptorProto] = {},  # noqa: B006 - read only
    name: str = "schema.proto",
) -> descriptor_pb2.FileDescriptorProto:
    """The descriptor protoc compiles from `text`, named `name`; `deps` maps each import path
    the text may use to that file's descriptor."""
    while name in deps:
        name = "_" + name
    depset = descriptor_pb2.FileDescriptorSet()
    for path, dep in deps.items():
        copy = depset.file.add()
        copy.CopyFrom(dep)
        copy.name = path
    with tempfile.TemporaryDirectory(prefix="tidelog-protoc-") as tmp:
        source = Path(tmp, "src")
        source.mkdir()
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        out = Path(tmp, "out.desc")
        args = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"--proto_path={source}",
            f"--proto_path={_include_dir()}",
            f"--descriptor_set_out={out}",
        ]
        if deps:
            depfile = Path(tmp, "deps.desc")
            depfile.write_bytes(depset.SerializeToString())
            args.append(f"--descriptor_set_in={depfile}")
        args.append(name)
        try:
            done = subprocess.run(
                args,
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=PROTOC_TIMEOUT_S,
                env={**os.environ, "LC_ALL": "C"},
            )
        except subprocess.TimeoutExpired:
            raise ProtoSyntaxError(f"protoc took longer than {PROTOC_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0 or not out.exists():
            raise _error(done.stderr or done.stdout, name)
        produced = descriptor_pb2.FileDescriptorSet()
        produced.ParseFromString(out.read_bytes())
    for file in produced.file:
        if file.name == name:
            return file
    raise ProtoSyntaxError("protoc produced no descriptor for the schema")


def _error(output: str, name: str) -> ProtoSyntaxError:
    """The first error protoc gave for the schema's own file (else its first line)."""
    located = [m for m in _ERROR.finditer(output) if "warning:" not in m.group("message")]
    own = [m for m in located if m.group("file") == name] or located
    if own:
        m = own[0]
        return ProtoSyntaxError(
            f"invalid Protobuf schema at line {m.group('line')}, column {m.group('column')}: "
            f"{m.group('message').strip()}",
            int(m.group("line")),
            int(m.group("column")),
        )
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    message = lines[0] if lines else "protoc failed without saying why"
    return ProtoSyntaxError(f"invalid Protobuf schema: {message}")
