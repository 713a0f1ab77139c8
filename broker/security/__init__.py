"""Security: what a principal may do. Today only the operation sets Kafka reports
without an authorizer; TLS, SASL and the ACL authorizer come with the security issue."""

#: Kafka's SecurityDisabledException message when no authorizer is configured (AclApis)
NO_AUTHORIZER = "No Authorizer is configured."
