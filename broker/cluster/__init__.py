"""Cluster mode on ZooKeeper (``zookeeper.connect`` set): the broker registers itself and
takes part in controller election, in Kafka's ZooKeeper-mode layout (zk_layout.py) so that
an operator recognises it. Work in progress: replication and the cluster-wide metadata view
come next (issue 11); without ``zookeeper.connect`` none of this runs."""
