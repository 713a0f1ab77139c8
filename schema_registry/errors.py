"""Confluent Schema Registry's errors (``io.confluent.kafka.schemaregistry.rest.exceptions``):
an HTTP status and the body ``{"error_code": 40401, "message": "..."}``, with Confluent's
codes and messages, so that clients that branch on ``error_code`` behave as against
Confluent's server."""

from __future__ import annotations


class RegistryError(Exception):
    def __init__(self, error_code: int, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        #: 40401 -> 404, 42201 -> 422, 50001 -> 500; three-digit codes are the status
        self.status = status if status is not None else (error_code if error_code < 1000 else error_code // 100)

    def body(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(40402, f"Version {version} not found.")


def schema_not_found(schema_id: object | None = None) -> RegistryError:
    return RegistryError(40403, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(40406, f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to "
                                f"delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(40407, f"Subject '{subject}' Version {version} was not deleted first before being "
                                f"permanently deleted")


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible_schema(message: str) -> RegistryError:
    return RegistryError(409, message)


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(42201, message)


def invalid_version(version: object) -> RegistryError:
    return RegistryError(42202, f"The specified version '{version}' is not a valid version id. Allowed values are "
                                f"between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility_level() -> RegistryError:
    return RegistryError(42203, "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                "backward_transitive, forward_transitive, and full_transitive")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(42204, f"Invalid mode {mode}. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, "
                                f"IMPORT")


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(42205, message)


def reference_exists(message: str) -> RegistryError:
    return RegistryError(42206, message)


def id_does_not_match(message: str) -> RegistryError:
    return RegistryError(42207, message)


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(42208, f"The specified subject '{subject}' is not a valid.")


def store_error(message: str = "Error in the backend data store") -> RegistryError:
    return RegistryError(50001, message)


def operation_timeout(message: str = "Operation timed out") -> RegistryError:
    return RegistryError(50002, message)


def forwarding_failed(message: str = "Error while forwarding the request to the primary") -> RegistryError:
    return RegistryError(50003, message)
