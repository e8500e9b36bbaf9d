"""A schema registry built into the broker, speaking Confluent Schema Registry's REST API.

- `registry`: subjects, versions, ids, compatibility levels and modes, kept in the compacted
  topic ``_schemas`` in Confluent's own record layout;
- `formats`: Avro, Protobuf and JSON Schema: parsing, canonical forms, compatibility rules
  (`compat_protobuf`, `compat_jsonschema`; Avro's are Apache avro's);
- `rest`: the REST API without I/O; `server`: it over HTTP, with an authenticator and an audit
  sink as seams (the console supplies both);
- `wire`: Confluent's wire format (magic byte 0, schema id, Protobuf's message indexes) and
  the decoders the message browser, exports and jobs read values with.
"""

from streams.schemas.errors import RegistryError
from streams.schemas.registry import SchemaReference, SchemaRegistry, StoreSchemaLog
from streams.schemas.server import RegistryConfig, RegistryServer

__all__ = [
    "RegistryConfig",
    "RegistryError",
    "RegistryServer",
    "SchemaReference",
    "SchemaRegistry",
    "StoreSchemaLog",
]
