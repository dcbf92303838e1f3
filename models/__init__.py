"""RocketMQ models. Defaults are those of rocketmq-all-5.3.3 unless a docstring says otherwise.

Each module names the Java class it mirrors. Out of scope for now (later issues): master/slave
HA, MQFaultStrategy, orderly consumption, transactions, the four other allocation strategies'
wiring beyond `allocation`, ACL, DLedger/controller mode, timer wheel, SQL92 filters.
"""
