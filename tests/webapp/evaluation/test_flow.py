"""Bots complete the rating and preference demo studies; allocation, balance and export."""

from __future__ import annotations

from collections import Counter

from tests.webapp.evaluation.conftest import export


def test_rating_demo_fills_every_source_with_three_raters(app, rating_demo, bot_for):
    results = [bot_for(rating_demo, f"RATER{i:02d}").run() for i in range(7)]
    outcomes = Counter(r.outcome for r in results)
    # 4 sources x 3 raters, 2 sources per person: 6 complete, the 7th finds the study full.
    assert outcomes == {"completed": 6, "study_full": 1}, [r.error for r in results]
    assert results[-1].completion_code == "RATFULL3"
    # Turned away at the study link, before consent (allocation.study_is_full).
    assert results[-1].pages == 0
    rows, columns = export(app, "rating-demo")
    assert columns[:6] == [
        "study_slug",
        "participant_id",
        "platform",
        "status",
        "item_id",
        "summary_id",
    ]
    # 12 slots x 4 summaries x 5 dimensions.
    assert len(rows) == 12 * 4 * 5
    per_source = Counter((r["item_id"], r["participant_id"]) for r in rows)
    assert Counter(item for item, _ in per_source) == {
        "transit-left": 3,
        "transit-right": 3,
        "housing-left": 3,
        "housing-right": 3,
    }
    # What the bots submitted is what was exported (position on the page, dimension, value).
    submitted = Counter()
    for r in results:
        for item, name, value in r.answers:
            pos, dim = name[1:].split("_", 1)
            submitted[(item, int(pos), dim, int(value))] += 1
    exported = Counter((r["item_id"], r["position"], r["dimension"], r["rating"]) for r in rows)
    assert exported == submitted
    assert {r["system"] for r in rows} == {"reference", "model-a", "model-b", "model-c"}
    assert {r["perspective"] for r in rows} == {"left", "right"}
    assert all(r["surplus"] == 0 and 1 <= r["rating"] <= 4 for r in rows)
    # Each rater saw the four summaries in an order of their own, not the file's.
    orders = {(r["participant_id"], r["item_id"]): [] for r in rows if r["dimension"] == "stance"}
    for r in rows:
        if r["dimension"] == "stance":
            orders[(r["participant_id"], r["item_id"])].append(r["system"])
    assert len({tuple(o) for o in orders.values()}) > 1


def test_rating_page_hides_system_names(app, rating_demo, bot_for):
    bot = bot_for(rating_demo, "LOOKER01")
    bot.open()
    while bot.page.kind != "summary_rating":
        bot.step()
    html = bot.page.text
    assert "Summary 4" in html and "<details" in html
    for system in ("model-a", "model-b", "model-c", "reference"):
        assert system not in html
    # Leaving one summary unrated is refused with a message, and nothing is stored.
    form = bot.answer()
    missing = next(k for k in form if k.startswith("r3_"))
    bot.must_fail({missing: None}, expect_invalid=True)
    rows, _ = export(app, "rating-demo")
    assert rows == []


def test_preference_demo_balances_orders(app, preference_demo, bot_for):
    results = [bot_for(preference_demo, f"JUDGE{i:02d}", p_choose_a=0.7).run() for i in range(9)]
    outcomes = Counter(r.outcome for r in results)
    # 6 pairs x 4 raters, 3 pairs per person: 8 complete, the 9th finds the study full.
    assert outcomes == {"completed": 8, "study_full": 1}, [r.error for r in results]
    assert results[-1].pages == 0
    rows, columns = export(app, "preference-demo")
    assert len(rows) == 24 and "chosen_system" in columns
    orders = Counter((r["pair_id"], r["order"]) for r in rows)
    # Every pair was seen by two raters in each order.
    assert set(orders.values()) == {2} and len(orders) == 12
    for r in rows:
        shown = (r["system_first"], r["system_second"])
        assert "human" in shown and r["chosen_system"] in shown
        assert r["chose_first"] == int(r["chosen_system"] == r["system_first"])
    submitted = Counter((pair, order, choice) for r in results for pair, order, choice in r.answers)
    exported = Counter(
        (r["pair_id"], r["order"], "first" if r["chose_first"] else "second") for r in rows
    )
    assert exported == submitted
    pairs, pair_columns = export(app, "preference-demo", "pairs")
    assert len(pairs) == 6 and "summary_b" in pair_columns
    assert {(p["n_judgments"], p["n_a_first"], p["n_b_first"]) for p in pairs} == {(4, 2, 2)}
