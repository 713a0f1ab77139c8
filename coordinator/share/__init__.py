"""KIP-932 share groups in the group coordinator: ShareGroupHeartbeat and ShareGroupDescribe,
the simple assignor, and the ShareGroup* records of ``__consumer_offsets``.

Modelled on coordinator/consumer/ (KIP-848), without what share groups do not have: no
revocation (a share-partition may have several members at once, so a member takes its
target assignment at once), no static members, no regex subscriptions, no classic members.
The share-partitions' delivery state lives elsewhere (``__share_group_state``, the share
coordinator); this package only says which member may fetch which partition, and asks for
new share-partitions to be initialised (coordinator/share/membership.py's ShareGroupHooks).
"""
