"""Push consumer models: rebalance, allocation strategies, ProcessQueue, offset stores."""
