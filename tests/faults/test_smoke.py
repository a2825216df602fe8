"""The fault campaign's CI smoke run (issue 32): one seed, 75 s of faults on a 3 + 3 cluster with every
workload, then zero anomalies of every class but the finding below, which is printed, not asserted.
Longer runs: ``make faults SEED=N DURATION=S`` (asserts every class).

Seed 31 draws kill -9 of a broker and of a partition leader, paused partition leaders and transaction
coordinators (past broker.session.timeout.ms: the paused-coordinator scenario), and cuts of a broker's
client and replication paths; no disk_full, which needs mount rights CI may not have. It replaces
test_replication.py's ten leader kills under an idempotent acks=all producer (the checker's LOST,
DUPLICATE, REORDER and REPLICA_DIVERGENCE judge the same)."""

from __future__ import annotations

import os

from tests.faults.campaign import run_campaign
from tests.faults.report import render

SMOKE_SEED = int(os.environ.get("FAULTS_SMOKE_SEED", "31"))
SMOKE_DURATION_S = 75.0


# A finding of issue 32's campaign that behaves as Kafka does (see the issue's report):
# - FATAL_CLIENT_ERROR "abort: INVALID_TXN_STATE": librdkafka sends EndTxn(abort) after an
#   AddPartitionsToTxn whose answer it never got (it went to the paused coordinator); the new
#   coordinator has the transaction Empty and answers INVALID_TXN_STATE, as Kafka 4.x does: its
#   TransactionCoordinator.endTransaction hands an EndTxn below v5 (client transaction version 1, no
#   epoch bump) to endTransactionWithTV1, where Empty accepts neither abort nor commit. Only EndTxn v5+
#   (KIP-890 transactions V2) aborts an Empty transaction with an epoch bump; librdkafka 2.16 sends
#   EndTxn v0-1 (rd_kafka_EndTxnRequest) and pykraft serves v0-3 (docs/apis.md), so TV2 never applies.
def _unexplained(name: str, found: list[str]) -> list[str]:
    if name == "FATAL_CLIENT_ERROR":
        return [line for line in found if "abort: INVALID_TXN_STATE" not in line]
    return found


def test_a_short_fault_campaign_finds_no_anomaly() -> None:
    result = run_campaign(SMOKE_SEED, SMOKE_DURATION_S)
    report = render(result)
    print(report)
    assert not result.workload_failures, report
    unexplained = {name: _unexplained(name, found) for name, found in result.check.anomalies.items()}
    assert not any(unexplained.values()), report
    assert result.check.acknowledged > 0 and result.check.committed_txns > 0
