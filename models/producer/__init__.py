"""Producer models: DefaultMQProducer send paths, queue selection, application workload."""
