"""A transactional producer's settings: TransactionMQProducer's fields (5.3.3 defaults) and the
model of the application behind its TransactionListener (models/producer/local_transaction.py).

A producer entry with a `transaction:` section sends every message with
`sendMessageInTransaction` (models/producer/transaction_producer.py). The application part is
ours (RocketMQ has no defaults for it): by default a local transaction takes 10 ms, commits with
probability 0.9, reports its outcome truthfully, and keeps a durable transaction log shared by the
group's instances (a database table) that `checkLocalTransaction` reads without lag.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sim.config import DurationMs, Float, Int, IntS
from sim.dist import Constant, Dist

INTEGER_MAX_VALUE = 2**31 - 1
LocalTransactionState = Literal["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"]


class TransactionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # the application (TransactionListener)
    local_transaction_ms: Dist = Field(Constant(value=10), description="executeLocalTransaction's duration")
    commit_probability: Float = Field(0.9, ge=0, le=1, description="the local transaction commits (else it rolls back)")
    unknow_probability: Float = Field(0.0, ge=0, le=1, description=(
        "executeLocalTransaction returns UNKNOW although decided"))
    exception_probability: Float = Field(0.0, ge=0, le=1, description="... or throws after deciding (counts as UNKNOW)")
    log_lag_ms: Dist = Field(Constant(value=0), description=(
        "the outcome reaches the transaction log this long after the decision"))
    check_unknow_probability: Float = Field(0.0, ge=0, le=1, description="a check answers UNKNOW whatever the log says")
    check_time_ms: Dist = Field(Constant(value=0), description="checkLocalTransaction's duration (on the check thread)")
    log_lost_on_crash: bool = Field(False, description=(
        "the log is each instance's memory: a crash loses it, other instances never see it"))
    unknown_transaction_answer: LocalTransactionState = Field("UNKNOW", description=(
        "the answer for a transaction the log does not know"))
    check_immunity_time_s: IntS | None = Field(None, ge=0, le=INTEGER_MAX_VALUE, description=(
        "CHECK_IMMUNITY_TIME_IN_SECONDS property"))
    shutdown_ms: DurationMs | None = Field(None, description=(
        "the application shuts the producer down for good (producer.shutdown())"))
    threads: Int = Field(1, ge=1, le=1_024, description=(
        "the application's threads calling sendMessageInTransaction, per instance (each is blocked through "
        "the half send, the local transaction and the end; arrivals wait for a free one)"))
    # TransactionMQProducer
    check_thread_pool_min_size: Int = Field(1, ge=1, le=1, description=(
        "checkThreadPoolMinSize (one check thread: modelled)"))
    check_thread_pool_max_size: Int = Field(1, ge=1, le=1, description="checkThreadPoolMaxSize")
    check_request_hold_max: Int = Field(2_000, gt=0, le=INTEGER_MAX_VALUE, description="checkRequestHoldMax")

    @model_validator(mode="after")
    def _probabilities(self) -> TransactionSpec:
        if self.unknow_probability + self.exception_probability > 1:
            raise ValueError("unknow_probability + exception_probability is at most 1")
        return self
