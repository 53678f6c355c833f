"""Issue 41 item 2 (a worker that loses the server reconnects): the pauses between its tries of a
request the server did not answer (devagent.worker.client.Backoff). The policy alone, drawn from
seeded random sources: no clock, no sleep."""

from __future__ import annotations

import random

from devagent.worker.client import Backoff


def test_issue41_item2_backoff_grows_jittered_to_a_cap_of_a_few_seconds() -> None:
    backoff = Backoff(random.Random(1))
    pauses = [backoff.failed(held=0.0) for _ in range(40)]
    ceiling = Backoff.FIRST
    for pause in pauses:  # each from its ceiling's upper half, the ceiling doubling to the cap
        assert ceiling / 2 <= pause <= ceiling
        ceiling = min(ceiling * 2, Backoff.CAP)
    assert pauses[0] <= Backoff.FIRST and Backoff.CAP <= 3.0
    assert max(pauses) <= Backoff.CAP
    assert len(set(pauses)) == len(pauses)  # jittered: no two alike


def test_issue41_item2_workers_cut_off_together_do_not_come_back_in_step() -> None:
    first, second = Backoff(random.Random(1)), Backoff(random.Random(2))
    a = [first.failed(held=0.0) for _ in range(8)]
    b = [second.failed(held=0.0) for _ in range(8)]
    assert all(x != y for x, y in zip(a, b, strict=True))


def test_issue41_item2_backoff_starts_over_after_a_try_the_server_held() -> None:
    backoff = Backoff(random.Random(3))
    for _ in range(10):
        backoff.failed(held=0.0)  # the server away: the ceiling at its cap
    assert backoff.failed(held=0.0) >= Backoff.CAP / 2
    # a long poll the server held, then cut (a restart): the server was there a moment ago
    assert backoff.failed(held=Backoff.HELD) <= Backoff.FIRST
    assert backoff.failed(held=0.0) <= 2 * Backoff.FIRST  # growing again from the start
    assert backoff.failed(held=Backoff.HELD - 0.01) <= 4 * Backoff.FIRST  # a quick failure: no start over
