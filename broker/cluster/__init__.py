"""The cluster layer every broker runs, a single node included (a one-broker cluster on the
local metadata store, broker/metadata/): node.py applies the store's state to this broker,
controller.py and election.py are the controller's duties and rules, reassignment.py and
log_dir_events.py its KIP-455 and KIP-112 work. membership.py, zk_metadata.py, zk_layout.py
and zk_calls.py are the ZooKeeper store (``zookeeper.connect``), in Kafka's ZooKeeper-mode
layout so that an operator recognises it."""
