"""The replica layer (Kafka's ReplicaManager, Partition, ReplicaFetcherManager and the
delayed-operation purgatory): every partition this broker holds is a Partition that leads
or follows at the epoch its metadata store gives, on a single node as in a cluster.
``manager.ReplicaManager`` is the one door to a partition (appends, reads, follower
fetches, transaction verification, offset lookups); ``replication`` is the leader's side
and the state changes, ``fetcher`` the follower's side, ``purgatory`` the parked requests."""
