"""Consumer models: the push consumer (DefaultMQPushConsumer, concurrent and orderly, with batch
consumption), the POP consumers (the gRPC SimpleConsumer and the POP-mode push consumer),
DefaultLitePullConsumer, and what they share: rebalance and the allocation strategies,
ProcessQueue, offset stores, send-back, the orderly broker locks, and their settings (config.py)."""
