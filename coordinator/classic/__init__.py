"""Kafka's classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

One module per API (``join``, ``sync``, ``heartbeat``, ``leave``), the rebalance they share
(``rebalance``: phases, member sessions and the other membership timers) and the JoinGroup/
SyncGroup response shapes (``responses``). KIP-848's consumer groups sit beside this
package, in ``coordinator/consumer/``, which also serves these four APIs for the members of a
consumer group that use the classic protocol (the handlers here hand such requests over).
"""

from coordinator.classic.heartbeat import Heartbeat
from coordinator.classic.join import JoinContext, JoinGroup
from coordinator.classic.leave import LeaveGroup
from coordinator.classic.rebalance import Rebalancer
from coordinator.classic.sync import SyncGroup

__all__ = ["Heartbeat", "JoinContext", "JoinGroup", "LeaveGroup", "Rebalancer", "SyncGroup"]
