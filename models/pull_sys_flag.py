"""PullSysFlag's FLAG_SUBSCRIPTION on a PULL_MESSAGE: does the pull carry its subscription?

A push consumer's pull (DefaultMQPushConsumerImpl.pullMessage, 5.3.3 and 4.9.8) sends its
subscription expression only with `postSubscriptionWhenPull` (false by default, and not a setting
of the model), so its sysFlag has no FLAG_SUBSCRIPTION: the broker reads the group's subscription
from its ConsumerManager, learnt from heartbeats (models/broker/broker.py
`on_pull_without_subscription`). A lite pull consumer's pull (DefaultLitePullConsumerImpl.pullSyncImpl:
`PullSysFlag.buildSysFlag(false, block, true, false, true)`) carries it, and a POP request carries
its expression: neither depends on the broker knowing the group.

The model tells the two apart by the request's type: a push consumer sends
`PullMessageWithoutSubscription`, a PullMessage in every field, registered with its own broker
handler; every other pull is a plain PullMessage (the flag set). On the wire and in the traces both
are PULL_MESSAGE: the subtype keeps the name `PullMessage` (the network's records name a payload by
its type's name), so runs whose pulls the broker serves trace exactly as before.
"""

from __future__ import annotations

from models.message import fast_constructor
from models.protocol import PullMessage

SUBSCRIPTION_NOT_EXIST = 24  # ResponseCode.SUBSCRIPTION_NOT_EXIST


class PullMessageWithoutSubscription(PullMessage):
    """PULL_MESSAGE whose sysFlag has no FLAG_SUBSCRIPTION (module docstring)."""

    __slots__ = ()


PullMessageWithoutSubscription.__name__ = "PullMessage"  # the same request on the wire and in the traces
new_pull_message_without_subscription = fast_constructor(PullMessageWithoutSubscription)
