"""Security: what a principal may do. ``operations`` has Kafka's operation sets and the
``*_authorized_operations`` bit fields, ``acls`` the ACL model (bindings, filters,
CreateAcls validation), ``authorizer`` the ACL authorizer (StandardAuthorizer's checks and
index). TLS and SASL come with the security issue."""

#: Kafka's SecurityDisabledException message when no authorizer is configured (AclApis)
NO_AUTHORIZER = "No Authorizer is configured."
