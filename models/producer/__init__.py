"""Producer models: DefaultMQProducer's send paths (SYNC, ASYNC, ONEWAY, selector, batch) and
TransactionMQProducer, fault-tolerant queue selection (MQFaultStrategy), the application's
workload and local transactions, and their settings (config.py, transaction_config.py)."""
