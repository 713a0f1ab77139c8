"""Security: what a principal may do. Today only the operation sets Kafka reports
without an authorizer; TLS, SASL and the ACL authorizer come with the security issue."""
