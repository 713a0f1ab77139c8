"""The broker's side of share groups (KIP-932): share sessions, and the service that runs
ShareFetch and ShareAcknowledge against the share-partitions the replica layer keeps and
the share coordinator's durable state."""
