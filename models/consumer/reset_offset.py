"""MQClientInstance.resetOffset: a client told by its broker to reset a topic's offsets (4.x,
or 5.x without server-side reset; the broker's side is models/broker/reset_offset.py).

The client (4.9.8 and 5.3.3 alike) marks the topic's affected ProcessQueues dropped and empties
them, sleeps 10 s, then for each affected queue still in its table stores the new offset (not
increase-only), persists it to the broker and removes the queue (`removeUnnecessaryMessageQueue`);
the next rebalance (≤ 20 s) takes the queues again from the broker's (new) committed offset.
Consumption already running finishes, its result discarded. Messages consumed after the
reset time are consumed again.

Simplified: the consumer is not suspended for the 10 s (`suspend()` makes every other queue's
pulls wait in 1 s steps); only the reset topic's queues stop.
"""

from __future__ import annotations

from typing import Any

from models.consumer.config import RESET_OFFSET_CLIENT_SLEEP_US
from models.protocol import ResetConsumerClientOffset
from models.records import CONSUMER_OFFSET_RESET


class ClientResetOffset:
    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.node = consumer.node
        self.node.handle(ResetConsumerClientOffset, self.on_reset)

    def on_reset(self, src: str, req_id: int, req: ResetConsumerClientOffset) -> None:
        consumer = self.consumer
        if req.group != consumer.group:
            return
        offsets = {(broker, queue_id): offset for broker, queue_id, offset in req.offsets}
        for mq, pq in consumer.process_queues.items():
            if mq.topic == req.topic and (mq.broker_name, mq.queue_id) in offsets:
                pq.dropped = True
                pq.msgs.clear()
                pq.msg_size_bytes = 0
        self.node.call_later(RESET_OFFSET_CLIENT_SLEEP_US, self._apply, req.topic, offsets)

    def _apply(self, topic: str, offsets: dict[tuple[str, int], int]) -> None:
        consumer, reset = self.consumer, 0
        for mq, pq in list(consumer.process_queues.items()):
            offset = offsets.get((mq.broker_name, mq.queue_id))
            if mq.topic == topic and offset is not None:
                consumer.offset_store.update(mq, offset, increase_only=False)
                consumer.drop_queue(mq, pq)
                reset += 1
        self.node.trace(CONSUMER_OFFSET_RESET, consumer.group, topic, reset)
