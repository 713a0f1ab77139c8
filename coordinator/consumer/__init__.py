"""Kafka's next-generation consumer group protocol (KIP-848) as a pure state machine:
ConsumerGroupHeartbeat and ConsumerGroupDescribe, member and group epochs, target
assignments computed on the broker by server-side assignors, and reconciliation where a
partition goes to its new owner only after the previous owner revoked it; members using the
classic protocol inside consumer groups and the online migration between the two group types
(classic_members.py, migration.py)."""
