"""The schema registry's errors, each with Confluent Schema Registry's error code and HTTP status.

Confluent's clients read ``{"error_code": N, "message": ...}`` and branch on the code (e.g.
40401: the subject is not there, 409: the schema is incompatible), so the codes are the API.
"""

from __future__ import annotations

from streams.errors import TidelogError


class RegistryError(TidelogError):
    """Base: ``error_code`` is Confluent's, ``status`` the HTTP status it is served with."""

    code = "schema_registry_error"
    error_code = 50001
    status = 500

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _error(name: str, error_code: int, status: int, code: str) -> type[RegistryError]:
    return type(name, (RegistryError,), {"error_code": error_code, "status": status, "code": code})


SubjectNotFound = _error("SubjectNotFound", 40401, 404, "subject_not_found")
VersionNotFound = _error("VersionNotFound", 40402, 404, "version_not_found")
SchemaNotFound = _error("SchemaNotFound", 40403, 404, "schema_not_found")
SubjectSoftDeleted = _error("SubjectSoftDeleted", 40404, 404, "subject_soft_deleted")
SubjectNotSoftDeleted = _error("SubjectNotSoftDeleted", 40405, 404, "subject_not_soft_deleted")
VersionSoftDeleted = _error("VersionSoftDeleted", 40406, 404, "version_soft_deleted")
VersionNotSoftDeleted = _error("VersionNotSoftDeleted", 40407, 404, "version_not_soft_deleted")
SubjectConfigNotFound = _error("SubjectConfigNotFound", 40408, 404, "subject_config_not_found")
SubjectModeNotFound = _error("SubjectModeNotFound", 40409, 404, "subject_mode_not_found")
IncompatibleSchema = _error("IncompatibleSchema", 409, 409, "incompatible_schema")
InvalidSchema = _error("InvalidSchema", 42201, 422, "invalid_schema")
InvalidVersion = _error("InvalidVersion", 42202, 422, "invalid_version")
InvalidCompatibilityLevel = _error(
    "InvalidCompatibilityLevel", 42203, 422, "invalid_compatibility_level"
)
InvalidMode = _error("InvalidMode", 42204, 422, "invalid_mode")
OperationNotPermitted = _error("OperationNotPermitted", 42205, 422, "operation_not_permitted")
ReferenceExists = _error("ReferenceExists", 42206, 422, "reference_exists")
Unauthorized = _error("Unauthorized", 40101, 401, "unauthorized")
Forbidden = _error("Forbidden", 40301, 403, "forbidden")
NotFound = _error("NotFound", 404, 404, "not_found")
MethodNotAllowed = _error("MethodNotAllowed", 405, 405, "method_not_allowed")
BadRequest = _error("BadRequest", 400, 400, "bad_request")
StoreError = _error("StoreError", 50001, 500, "store_error")


class SchemaParseError(ValueError):
    """A schema that does not parse: the message, and where (1-based line and column) when
    the parser says so."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"{message}{where}")
        self.line, self.column = line, column
