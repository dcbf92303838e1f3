"""RocketMQ models. Defaults are those of rocketmq-all-5.3.3 unless a docstring says otherwise;
where 4.9.8 differs, a scenario's `version` / `client_version` (version.py) chooses.

Each module names the Java class it mirrors:
- broker/: the broker (store, send and pull processors, HA, transactions, timer and delay
  messages, retention, POP's broker side); controller/: the 5.x controllers of controller mode;
- producer/: DefaultMQProducer's send paths (SYNC, ASYNC, ONEWAY, selector, batch,
  transactional), fault-tolerant queue selection, the application's workload;
- consumer/: the consumers (push, concurrent and orderly, with batch consumption; POP: the
  SimpleConsumer and the POP-mode push consumer; DefaultLitePullConsumer), rebalance, offsets;
- client_instance.py, namesrv.py, admin.py: MQClientInstance, the NameServer, the operator's commands;
- message.py, protocol.py, topic_publish_info.py, thread_local_index.py, perm_name.py: messages,
  requests and route data; java.py: Java's arithmetic and java.util.Random; version.py: 4.x / 5.x;
- the settings each model reads, typed where it lives (broker/config.py, producer/config.py,
  consumer/config.py, controller/config.py; names.py: topic and group names);
- records.py, the record kinds the models emit, and coverage_points.py, their rare-state catalogue.

Out of scope for now: ACL, DLedger mode, SQL92 filters, orderly BROADCASTING consumption.

The layering rule (sim/__init__.py): models import only the kernel (`sim`); analysis reads
records.py and coverage_points.py, the record schema and the coverage catalogue, and no model.
"""

import sim  # noqa: E402,F401  the compiled build is checked before any compiled module loads (sim/compiled.py)
