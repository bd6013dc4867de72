"""The replica pool: which replica gets the next attempt, and how long a failing one stays out."""

from __future__ import annotations

import doctest

import analysis.llm.backends.replicas as replicas
from analysis.llm.backends.replicas import MAX_COOLDOWN_S, ReplicaPool


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_examples_in_the_docstrings() -> None:
    from analysis import retry

    for module, examples in ((replicas, 2), (retry, 5)):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted >= examples and result.failed == 0, module.__name__


def test_the_least_busy_replica_gets_the_next_attempt_in_turn_on_ties() -> None:
    pool = ReplicaPool(["a", "b", "c"])
    picked = []
    for _ in range(6):
        replica = pool.pick()
        pool.begin(replica)
        picked.append(replica.url)
    assert sorted(picked) == ["a", "a", "b", "b", "c", "c"]
    busy = pool.replicas[0]
    for other in pool.replicas[1:]:
        pool.succeeded(other)
    assert pool.pick() is not busy


def test_an_unreachable_replica_stays_out_for_a_doubling_cooldown() -> None:
    clock = Clock()
    pool = ReplicaPool(["a", "b"], cooldown_s=10.0, clock=clock)
    a, b = pool.replicas
    for _ in range(3):  # three requests in flight on `a` when it died: one cooldown for all
        pool.begin(a)
    for _ in range(3):
        pool.failed(a, "connection refused", unreachable=True)
    assert a.taken_out == 1 and a.out_until == 110.0 and a.failures["connection refused"] == 3
    assert [pool.pick() for _ in range(4)] == [b] * 4
    clock.now = 110.0  # back after its cooldown: tried again, and out twice as long on failure
    pool.begin(b)  # b is busy, a is idle again
    assert pool.pick() is a
    pool.begin(a)
    pool.failed(a, "connection refused", unreachable=True)
    assert a.taken_out == 2 and a.out_until == 130.0
    clock.now = 130.0
    pool.begin(a)
    pool.succeeded(a)  # an answer puts it back for good
    assert a.failures_in_row == 0 and a.out_until == 0.0
    for _ in range(20):
        clock.now += 1000
        pool.begin(a)
        pool.failed(a, "connection refused", unreachable=True)
    assert a.out_until - clock.now == MAX_COOLDOWN_S


def test_a_lone_replica_or_a_server_error_takes_nothing_out() -> None:
    clock = Clock()
    lone = ReplicaPool(["a"], clock=clock)
    pool = ReplicaPool(["a", "b"], clock=clock)
    for p in (lone, pool):
        replica = p.replicas[0]
        p.begin(replica)
        p.failed(replica, "HTTP 503", unreachable=False)
    pool.begin(pool.replicas[0])
    lone.begin(lone.replicas[0])
    lone.failed(lone.replicas[0], "connection refused", unreachable=True)
    assert lone.replicas[0].taken_out == 0 and lone.pick() is lone.replicas[0]
    assert pool.replicas[0].taken_out == 0 and len(pool.up()) == 2


def test_when_every_replica_is_out_the_first_to_come_back_is_tried() -> None:
    clock = Clock()
    pool = ReplicaPool(["a", "b"], cooldown_s=10.0, clock=clock)
    a, b = pool.replicas
    pool.begin(b)
    pool.failed(b, "connection refused", unreachable=True)
    clock.now += 1
    pool.begin(a)
    pool.failed(a, "connection refused", unreachable=True)
    assert pool.up() == [] and pool.pick() is b
