"""The built-in Schema Registry's shell: the ``_schemas`` topic driver (service), the REST
API on ``krait.schema.registry.listener`` (rest) and its basic auth (auth). The registry's
rules live in the pure ``schema_registry`` package."""
