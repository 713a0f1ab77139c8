"""Kafka's next-generation consumer group protocol (KIP-848) as a pure state machine:
ConsumerGroupHeartbeat and ConsumerGroupDescribe, member and group epochs, target
assignments computed on the broker by server-side assignors, and reconciliation where a
partition goes to its new owner only after the previous owner revoked it."""
