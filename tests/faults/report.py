"""The campaign's report: counts per fault, acknowledged values, transactions, anomalies (with the
offending values) and availability per fault kind, as Markdown; on a failure also the seed and the
fault timeline, so the run can be repeated."""

from __future__ import annotations

from collections import Counter

from tests.faults.campaign import CampaignResult
from tests.faults.checker import ANOMALIES

EXAMPLES = 10


def render(result: CampaignResult) -> str:
    check = result.check
    faults = Counter(f.kind for f in result.history.faults)
    lines = [
        f"## Fault campaign, seed {result.seed}, {result.duration_s:.0f} s",
        "",
        f"- faults: {sum(faults.values())}; acknowledged values: {check.acknowledged}; "
        f"transactions committed: {check.committed_txns}, aborted: {check.aborted_txns}; "
        f"records consumed by the groups: {len(result.history.consumed)}; "
        f"OffsetFetch answers observed: {len(result.history.observations)}",
        f"- verdict: {'PASS' if result.ok else 'FAIL'}",
        *(
            f"- re-sent by librdkafka across an epoch bump (not an anomaly): {line}"
            for line in check.resent_across_bump
        ),
        *(
            f"- abort refused with INVALID_TXN_STATE as Kafka refuses it (not an anomaly): {line}"
            for line in check.abort_refused
        ),
        *(
            f"- fatal after librdkafka re-used a dropped broker's sequences (not an anomaly): {line}"
            for line in check.sequence_reused
        ),
        *(
            f"- one transform output per copy of its input (not an anomaly): {line}"
            for line in check.copies_of_copied_input
        ),
        "",
        "| anomaly | count |",
        "| --- | ---: |",
        *(f"| {name} | {len(check.anomalies[name])} |" for name in ANOMALIES),
        "",
        "| fault | count | longest time without an acknowledgment (s) |",
        "| --- | ---: | ---: |",
        *(
            f"| {kind} | {n} | {check.unavailable_s.get(kind, 0.0):.1f} |"
            for kind, n in sorted(faults.items())
        ),
    ]
    if not result.ok:
        lines += [
            "",
            f"### Failure: repeat with `make faults SEED={result.seed} DURATION={result.duration_s:.0f}`",
        ]
        lines += [f"- workload failure: {failure}" for failure in result.workload_failures]
        for name in ANOMALIES:
            found = check.anomalies[name]
            lines += [f"- {name}: {line}" for line in found[:EXAMPLES]]
            if len(found) > EXAMPLES:
                lines.append(f"- {name}: ... {len(found) - EXAMPLES} more")
        lines += [f"- cluster directory (node logs, client debug logs): {result.directory}", ""]
        lines += ["| t start (s) | t end (s) | fault | nodes |", "| ---: | ---: | --- | --- |"]
        lines += [
            f"| {f.t_start_s:.1f} | {f.t_end_s:.1f} | {f.kind} | {','.join(map(str, f.nodes))} |"
            for f in result.history.faults
        ]
    return "\n".join(lines) + "\n"
