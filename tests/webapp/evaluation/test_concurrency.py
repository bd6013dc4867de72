"""Concurrent bots over HTTP: every pair gets exactly k verdicts from k different people, half
in each order, on SQLite and on PostgreSQL (the order count runs under the pair's row lock)."""

from __future__ import annotations

from collections import Counter

import pytest

from webapp.bots import BotBehaviour, run_bots

from .conftest import export, load, write_preference_study

N_PAIRS, K, BATCH = 12, 4, 2


def _run(app, serve_app, tmp_path) -> None:
    definition = load(
        app, write_preference_study(tmp_path / "s", n_pairs=N_PAIRS, k=K, batch=BATCH)
    )
    base = serve_app(app)
    n_needed = N_PAIRS * K // BATCH
    summary = run_bots(
        None,
        definition,
        n=n_needed + 6,
        behaviour=BotBehaviour(platform="link", p_choose_a=0.6),
        url=base,
        concurrency=8,
        seed=7,
    )
    assert summary.errors == []
    counts = summary.counts
    # Near the end the last free slots may sit on one pair, which a person can take once: a
    # few complete a partial batch, so at least n_needed complete and the rest are turned away.
    assert set(counts) <= {"completed", "study_full"} and sum(counts.values()) == n_needed + 6
    assert counts["completed"] >= n_needed
    rows, _ = export(app, "pref-small")
    assert len(rows) == N_PAIRS * K
    per_pair = Counter(r["pair_id"] for r in rows)
    assert set(per_pair.values()) == {K} and len(per_pair) == N_PAIRS
    assert len({(r["pair_id"], r["participant_id"]) for r in rows}) == len(rows)
    orders = Counter((r["pair_id"], r["order"]) for r in rows)
    assert set(orders.values()) == {K // 2} and len(orders) == 2 * N_PAIRS
    pairs, _ = export(app, "pref-small", "pairs")
    assert {(p["n_a_first"], p["n_b_first"]) for p in pairs} == {(K // 2, K // 2)}


@pytest.mark.slow
def test_balanced_orders_under_concurrency_on_sqlite(app, serve_app, tmp_path):
    _run(app, serve_app, tmp_path)


@pytest.mark.slow
@pytest.mark.postgres
def test_balanced_orders_under_concurrency_on_postgres(pg_app, serve_app, tmp_path):
    _run(pg_app, serve_app, tmp_path)
