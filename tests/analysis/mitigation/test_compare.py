"""`compare` on the tiny model: the summarization and fact-checking tables of the seed study."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.mitigation import compare
from tests.analysis.mitigation.test_runner import DOCS

FACTS = [
    {"item_id": f"f{i}{t}", "text": f"Statement {i} is {t}.", "pair_id": f"p{i}",
     "truth": t == "true", "date": date}
    for i, date in [(1, "2023-01-05"), (2, "2024-03-01")]
    for t in ("true", "false")
]  # fmt: skip


def hashing_embedder(texts):
    """A deterministic bag-of-words embedder: enough to exercise the primacy maths."""
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(n_features=256, alternate_sign=False).transform(texts).toarray()


@pytest.fixture(scope="module")
def comparison(tiny_model_dir, tmp_path_factory):
    from analysis.llm.backends import GenerationSettings, make_backend

    backend = make_backend(
        "transformers", str(tiny_model_dir), GenerationSettings(max_new_tokens=5, batch_size=8),
        device="cpu",
    )  # fmt: skip
    docs = DOCS + [{**d, "item_id": d["item_id"] + "b", "dataset": "news"} for d in DOCS]
    out = tmp_path_factory.mktemp("compare")
    result = compare.run_comparison(
        backend,
        out,
        methods=compare.select_methods("all"),
        summary_items=docs,
        fact_items=FACTS,
        embedder=hashing_embedder,
        judge=make_backend("vader", None),
        cutoff="2023-06-30",
        progress=False,
    )
    return result, backend, docs, out


def test_summarization_table_has_baseline_and_15_methods_per_dataset(comparison):
    result, _, docs, _ = comparison
    table = result.summarization
    assert list(table.columns[:10]) == compare.SUMMARY_COLUMNS
    assert sorted(table["dataset"].unique()) == ["news", "reviews"]
    for _, rows in table.groupby("dataset"):
        assert len(rows) == 16
        assert rows["method"].iloc[0] == "baseline"
        assert set(rows["method"]) == {"baseline", *compare.SUMMARY_METHODS}
    assert (table["n"] == 2).all()
    assert np.allclose(table["coverage"], table[["s_b", "s_m", "s_e"]].mean(axis=1))
    assert table["psi_pri"].between(0, 1).all()


def test_summarization_table_matches_the_metrics_on_the_records(comparison):
    from analysis.metrics.primacy import primacy_scores, primacy_similarities
    from analysis.metrics.records import read_records, summary_pairs

    result, _, _, out = comparison
    pairs = summary_pairs(read_records(out / "summaries.jsonl"))
    pairs = pairs.loc[(pairs["method"] == "cloze") & (pairs["dataset"] == "news")]
    expected = primacy_scores(primacy_similarities(pairs, embedder=hashing_embedder))
    row = result.summarization.set_index(["dataset", "method"]).loc[("news", "cloze")]
    for col in ("s_b", "s_m", "s_e", "psi_pri"):
        assert row[col] == pytest.approx(float(expected[col].iloc[0]))


def test_phi_frame_matches_the_framing_metric(comparison):
    from analysis.metrics.framing import framing_change, join_framing
    from analysis.metrics.records import read_records

    result, _, _, out = comparison
    pairs = join_framing(read_records(out / "judgments.jsonl"))
    assert set(pairs["judge"]) == {"vaderSentiment"}
    expected = framing_change(pairs, by=["dataset", "method"]).set_index(["dataset", "method"])
    table = result.summarization.set_index(["dataset", "method"])
    assert table["n_framing"].eq(2).all()
    assert table["phi_frame"].between(0, 1).all()
    for key in table.index:
        assert table.loc[key, "phi_frame"] == pytest.approx(expected.loc[key, "phi_frame"])


def test_framing_judgments_cover_every_summary(comparison):
    from analysis.metrics.records import read_records

    _, _, docs, out = comparison
    judged = read_records(out / "judgments.jsonl")
    assert len(judged) == len(docs) * (1 + 16)  # the sources, then every summary
    assert set(judged["label"]) <= {"positive", "negative", "neutral", "other"}


def test_fact_table_has_four_rows_per_cutoff_split(comparison):
    table = comparison[0].fact_checking
    assert list(table.columns[:11]) == compare.FACT_COLUMNS
    for period in ("pre", "post", "all"):
        rows = table.loc[table["period"] == period]
        assert list(rows["method"]) == ["baseline", *compare.FACT_METHODS]
    pre = table.loc[table["period"] == "pre"]
    assert (pre["n_pairs"] == 1).all() and (pre["n_true"] == 1).all()
    for col in ("actual_acc", "falsified_acc", "strict_acc"):
        assert table[col].dropna().isin([0.0, 0.5, 1.0]).all()


def test_rerun_generates_nothing(comparison):
    from analysis.llm.backends import make_backend

    result, backend, docs, out = comparison
    again = compare.run_comparison(
        backend, out, methods=compare.select_methods("all"), summary_items=docs,
        fact_items=FACTS, embedder=hashing_embedder, judge=make_backend("vader", None),
        cutoff="2023-06-30", progress=False,
    )  # fmt: skip
    assert all(r.n_generated == 0 for r in again.runs)
    pd.testing.assert_frame_equal(again.summarization, result.summarization)


def test_plot_comparison_draws_one_bar_per_method_and_metric(comparison):
    import matplotlib

    matplotlib.use("Agg")
    ax = compare.plot_comparison(comparison[0].summarization)
    assert len(ax.patches) == 16 * 3
    import matplotlib.pyplot as plt

    plt.close(ax.figure)


def test_select_methods():
    assert len(compare.select_methods("all")) == 18
    assert compare.select_methods("baseline,mirostat") == ["mirostat"]
    with pytest.raises(KeyError, match="unknown methods"):
        compare.select_methods("mirostat,nope")


def test_fact_table_names_the_record_whose_truth_is_missing(tmp_path):
    """Regression: records resumed from an older facts file ended in "not a truth value: nan"."""
    import json

    from analysis.metrics.records import read_records

    path = tmp_path / "fact_checks.jsonl"
    rows = [
        {"item_id": f["item_id"], "model": "m", "task": "fact-check", "method": "baseline",
         "label": "true", "input": dict(f)}
        for f in FACTS
    ]  # fmt: skip
    del rows[2]["input"]["truth"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError) as info:
        compare.fact_check_table(read_records(path), cutoff=None)
    text = str(info.value)
    assert str(path) in text and repr(FACTS[2]["item_id"]) in text and "'truth'" in text


def test_inputs_are_checked_before_anything_is_generated(tmp_path):
    from tests.analysis.mitigation.test_runner import EchoBackend

    backend = EchoBackend()
    no_pair = [{k: v for k, v in f.items() if k != "pair_id"} for f in FACTS]
    with pytest.raises(ValueError, match=r"have no field 'pair_id' \(first: record 1, item_id"):
        compare.run_comparison(
            backend, tmp_path / "a", methods=["epistemic-tagging"], fact_items=no_pair,
            progress=False,
        )  # fmt: skip
    bad_truth = [*FACTS[:3], {**FACTS[3], "truth": "perhaps"}]
    with pytest.raises(ValueError, match=r"record 4, item_id 'f2false': field 'truth' is"):
        compare.run_comparison(
            backend, tmp_path / "b", methods=[], fact_items=bad_truth, progress=False
        )
    with pytest.raises(ValueError, match="knowledge-boundary needs the model's cutoff"):
        compare.run_comparison(
            backend, tmp_path / "c", methods=["epistemic-tagging", "knowledge-boundary"],
            fact_items=FACTS, progress=False,
        )  # fmt: skip
    assert backend.prompts == []  # not one model call
    assert not any((tmp_path / d).exists() for d in "abc")


def test_fact_table_names_the_file_when_a_field_is_missing_from_every_record(tmp_path):
    import json

    from analysis.metrics.records import read_records

    path = tmp_path / "fact_checks.jsonl"
    rows = [
        {"item_id": f["item_id"], "model": "m", "task": "fact-check", "method": "cloze",
         "label": "true", "input": {k: v for k, v in f.items() if k != "pair_id"}}
        for f in FACTS
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError) as info:
        compare.fact_check_table(read_records(path), cutoff=None)
    text = str(info.value)
    assert text.startswith(f"{path}: the cloze fact-check records (first: item 'f1true')")
    assert "no field 'pair_id'" in text and "fresh --out" in text
