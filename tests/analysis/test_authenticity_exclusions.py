"""The authenticity exclusion rule: applied like the other participant rules, listed in the rule
table with its counts, and the report's sensitivity line (the primary result with and without)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.exclusions import (
    AnnotationRules,
    ChoiceRules,
    exclude_annotations,
    exclude_choice,
    exclusion_summary,
)
from analysis.report.rules import (
    authenticity_sensitivity,
    rule_status,
    rules_sentence,
    sensitivity_sentence,
)
from analysis.simulate import simulate_choice_study
from analysis.stats.choice import chi2_choice, choice_effects


def _with_scores(seed: int = 3) -> pd.DataFrame:
    """A simulated export whose participants carry authenticity columns: every fifth one an
    agent that always chose the target (score 6, the canary on every tenth)."""
    data = simulate_choice_study(60, 10, seed=seed)
    people = sorted(data["participant_id"].unique())
    agents = set(people[::5])
    canary = set(people[::10])
    data["auth_score"] = data["participant_id"].map(lambda p: 6 if p in agents else 0)
    data["auth_canary"] = data["participant_id"].map(lambda p: int(p in canary))
    data.loc[data["participant_id"].isin(agents), "chose_target"] = 1
    return data


def _labels_with_scores(seed: int = 5) -> pd.DataFrame:
    """Simulated annotation labels whose annotators carry authenticity columns: every fourth
    one scored 5, every eighth with the canary word."""
    from tests.analysis.annotation_data import simulate_annotation_study

    labels, _ = simulate_annotation_study(30, 5, 16, seed=seed)
    people = sorted(labels["participant_id"].unique())
    flagged, canary = set(people[::4]), set(people[::8])
    labels["auth_score"] = labels["participant_id"].map(lambda p: 5 if p in flagged else 0)
    labels["auth_canary"] = labels["participant_id"].map(lambda p: int(p in canary))
    return labels


@pytest.mark.parametrize("kind", ["choice", "annotation"])
def test_the_canary_and_the_score_exclude_whole_participants_in_rule_order(kind):
    """The same rule for trials and for labels: 12 of 60 agents (6 with the canary word), or 4
    of 16 annotators (2 with it); those with the word are counted under the canary rule,
    checked first."""
    choice = kind == "choice"
    data = _with_scores() if choice else _labels_with_scores()
    Rules, exclude = (
        (ChoiceRules, exclude_choice) if choice else (AnnotationRules, exclude_annotations)
    )
    rules = Rules(authenticity_max_score=2, authenticity_canary=True)
    kept, excluded = exclude(data, rules)
    by_reason = excluded.groupby("reason")["participant_id"].nunique().to_dict()
    n = 6 if choice else 2
    assert by_reason == {
        "followed the canary instruction": n,
        "authenticity score above max_score": n,
    }
    assert kept["auth_score"].max() == 0 and len(kept) + len(excluded) == len(data)
    table = rule_status(data, excluded, rules).set_index("rule")
    assert table.loc["authenticity_canary", ["status", "n_participants"]].tolist() == ["applied", n]
    assert rules.as_dict()["authenticity"] == {"max_score": 2, "canary": True}
    assert "authenticity" not in Rules().as_dict()
    summary = exclusion_summary(data, excluded)
    assert list(summary["reason"]) == [
        "followed the canary instruction",
        "authenticity score above max_score",
        "total",
    ]
    # A score at the maximum is kept (the rule excludes scores *above* it).
    kept_at, _ = exclude(data, Rules(authenticity_max_score=6))
    assert len(kept_at) == len(data)


def test_the_rule_table_lists_the_rule_with_counts_or_says_why_it_was_not_checked():
    data = _with_scores()
    rules = ChoiceRules(authenticity_max_score=2)
    _, excluded = exclude_choice(data, rules)
    table = rule_status(data, excluded, rules).set_index("rule")
    score = table.loc["authenticity_max_score"]
    assert (score["status"], score["n_participants"], score["setting"]) == ("applied", 12, 2)
    assert table.loc["authenticity_canary", "status"] == "off"
    assert "authenticity_max_score (120 rows of 12 participants excluded)" in rules_sentence(
        table.reset_index()
    )
    plain = data.drop(columns=["auth_score", "auth_canary"])
    with pytest.raises(ValueError, match="the data have no auth_score column.*export the study"):
        exclude_choice(plain, rules)


def test_the_rules_dict_names_the_authenticity_rule_only_when_it_is_on():
    assert "authenticity" not in ChoiceRules().as_dict()
    on = ChoiceRules(authenticity_canary=True).as_dict()
    assert on["authenticity"] == {"max_score": None, "canary": True}
    assert "authenticity_canary" not in on
    assert ChoiceRules(authenticity_canary=True).without_authenticity() == ChoiceRules()


def test_the_sensitivity_line_is_the_primary_test_with_and_without_the_rule():
    data = _with_scores()
    rules = ChoiceRules(authenticity_max_score=2, authenticity_canary=True)
    table = authenticity_sensitivity(data, rules)
    assert list(table["analysis"]) == ["with authenticity exclusions", "without"]
    # Each row is the primary contrast's risk difference and chi2_choice's primary test on the
    # data each rule set keeps.
    for row, applied in zip(table.itertuples(), (rules, ChoiceRules()), strict=True):
        kept, _ = exclude_choice(data, applied)
        primary = chi2_choice(kept).iloc[0]
        effects = choice_effects(kept)
        difference = effects[effects["effect"] == "risk_difference"].iloc[0]
        assert row.n_participants == kept["participant_id"].nunique()
        assert np.isclose(row.estimate, difference["estimate"])
        assert np.isclose(row.ci_low, difference["ci_low"])
        assert np.isclose(row.p_val, primary["p_val"])
    assert table.loc[0, "n_participants"] == 48 and table.loc[1, "n_participants"] == 60
    # The agents always chose the target: keeping them changes the estimate.
    assert table.loc[0, "estimate"] != pytest.approx(table.loc[1, "estimate"])
    line = sensitivity_sentence(table)
    assert line.startswith(
        "Sensitivity of the primary result to the authenticity exclusions: with them, "
        "48 participants, difference in choice rates"
    )
    assert "; without them, 60 participants" in line
    assert authenticity_sensitivity(data, ChoiceRules()) is None


def test_analyze_choice_reports_the_rule_and_the_sensitivity(tmp_path):
    from click.testing import CliRunner

    from framelab.cli import main

    path = tmp_path / "export.csv"
    _with_scores().to_csv(path, index=False)
    out = tmp_path / "report"
    result = CliRunner().invoke(
        main,
        [
            "analyze", "choice", str(path), "--out", str(out), "--no-figures", "--no-glmm",
            "--no-gee", "--authenticity-max-score", "2", "--authenticity-canary",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Sensitivity of the primary result to the authenticity exclusions" in report
    assert "authenticity_max_score" in report and "authenticity_canary" in report


# -- the annotation analysis takes the same rule ------------------------------------------------
def test_analyze_annotations_applies_the_rule_and_lists_it_with_counts(tmp_path):
    import json

    from click.testing import CliRunner

    from framelab.cli import main

    path = tmp_path / "labels.csv"
    _labels_with_scores().to_csv(path, index=False)
    out = tmp_path / "report"
    args = ["analyze", "annotations", "--export", str(path), "--out", str(out), "--no-figures"]
    result = CliRunner().invoke(
        main, [*args, "--authenticity-max-score", "2", "--authenticity-canary"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "results.json").read_text())
    rules = {r["rule"]: r for r in payload["tables"]["exclusion_rules"]}
    score = rules["authenticity_max_score"]
    assert (score["status"], score["n_participants"]) == ("applied", 2)
    assert rules["authenticity_canary"]["n_participants"] == 2
    assert payload["meta"]["n_annotators"] == 12
    assert "authenticity_max_score" in (out / "report.html").read_text(encoding="utf-8")


def test_mturk_batches_refuse_the_options_with_the_reason(tmp_path):
    from click.testing import CliRunner

    from framelab.cli import main

    mturk = tmp_path / "batch.csv"
    pd.DataFrame(
        {"WorkerId": ["W1"], "Input.item_id": ["i1"], "Input.base_sentiment": ["positive"]}
        | {"Answer.sentiment.label": ["Positive"]}
    ).to_csv(mturk, index=False)
    out = str(tmp_path / "out")
    result = CliRunner().invoke(
        main,
        ["analyze", "annotations", "--mturk", str(mturk), "--out", out, "--authenticity-canary"],
    )
    assert result.exit_code == 2 and "MTurk batch results carry no auth_" in result.output


# -- the rating and preference analyses take it too, for whole raters -------------------------
def _evaluation_export(kind: str, tmp_path, *, auth: bool = True) -> tuple[pd.DataFrame, list]:
    """A rating or preference long export (and, for preferences, its pairs file) in which one
    rater has authenticity score 5 and another the canary word (score 0); its CLI arguments."""
    from tests.analysis.ratings.test_cli import preference_exports, rating_export

    if kind == "ratings":
        data, args = rating_export(), []
    else:
        data, pairs = preference_exports()
        pairs.to_csv(tmp_path / "pairs.csv", index=False)
        args = ["--pairs", str(tmp_path / "pairs.csv")]
    if auth:
        people = sorted(data["participant_id"].unique())
        data["auth_score"] = (data["participant_id"] == people[0]) * 5
        data["auth_canary"] = (data["participant_id"] == people[1]).astype(int)
    data.to_csv(tmp_path / "long.csv", index=False)
    return data, ["analyze", kind, str(tmp_path / "long.csv"), *args, "--no-figures"]


@pytest.mark.parametrize("kind", ["ratings", "preferences"])
def test_analyze_ratings_and_preferences_drop_flagged_raters_and_list_the_rule(kind, tmp_path):
    import json

    from click.testing import CliRunner

    from framelab.cli import main

    data, args = _evaluation_export(kind, tmp_path)
    people = sorted(data["participant_id"].unique())
    rows_of = data["participant_id"].value_counts()
    options = ["--authenticity-max-score", "2", "--authenticity-canary"]
    out = tmp_path / "report"
    result = CliRunner().invoke(main, [*args, "--out", str(out), *options])
    assert result.exit_code == 0, result.output
    assert (
        f"Exclusion rules applied: authenticity_canary ({rows_of[people[1]]} rows of 1 "
        f"participants excluded), authenticity_max_score ({rows_of[people[0]]} rows of 1 "
        "participants excluded)." in result.output
    )
    payload = json.loads((out / "results.json").read_text())
    rules = {r["rule"]: r for r in payload["tables"]["exclusion_rules"]}
    assert [(r["status"], r["setting"], r["n_participants"]) for r in rules.values()] == [
        ("applied", True, 1),
        ("applied", 2, 1),
    ]
    assert payload["meta"]["exclusion_rules"]["authenticity_max_score"]["status"] == "applied"
    total = pd.read_csv(out / "exclusions.csv").set_index("reason").loc["total"]
    assert (total["n_rows"], total["n_participants"]) == (rows_of[people[:2]].sum(), 2)
    kept = data[~data["participant_id"].isin(people[:2])]
    meta = payload["meta"]
    assert meta["n_raters"] == len(people) - 2
    if kind == "ratings":
        assert (meta["n_ratings_input"], meta["n_ratings"]) == (len(data), len(kept))
        # The published table is the flagged raters' ratings left out, recomputed directly.
        direct = kept.groupby(["system", "dimension", "summary_id"])["rating"].mean()
        direct = direct.groupby(["system", "dimension"]).mean()
        table = pd.read_csv(out / "rating_table.csv").set_index("system")
        assert table.loc["gpt-4o", "stance"] == pytest.approx(direct["gpt-4o", "stance"])
    else:
        assert (meta["n_verdicts_input"], meta["n_verdicts"]) == (len(data), len(kept))
        raters = set(pd.read_csv(out / "order_consistency.csv")["participant_id"])
        assert raters == set(kept["participant_id"])
    report = (out / "report.html").read_text(encoding="utf-8")
    assert f"Excluded {'ratings' if kind == 'ratings' else 'verdicts'} by reason" in report
    assert "authenticity_max_score" in report and "authenticity_canary" in report

    plain = tmp_path / "plain"
    result = CliRunner().invoke(main, [*args, "--out", str(plain)])
    assert result.exit_code == 0, result.output
    payload = json.loads((plain / "results.json").read_text())
    assert [r["status"] for r in payload["tables"]["exclusion_rules"]] == ["off", "off"]
    assert payload["meta"]["n_raters"] == len(people)
    assert pd.read_csv(plain / "exclusions.csv")["n_rows"].tolist() == [0]
    assert "Exclusion rules" not in result.output


@pytest.mark.parametrize("kind", ["choice", "annotations", "ratings", "preferences"])
def test_the_rule_is_refused_on_an_export_without_the_auth_columns(kind, tmp_path):
    """All four analyses refuse alike, naming the missing columns and the remedy."""
    from click.testing import CliRunner

    from framelab.cli import main

    if kind in ("choice", "annotations"):
        data = _with_scores() if kind == "choice" else _labels_with_scores()
        path = tmp_path / "export.csv"
        data.drop(columns=["auth_score", "auth_canary"]).to_csv(path, index=False)
        flag = ["--no-glmm", "--no-gee"] if kind == "choice" else ["--export"]
        args = ["analyze", kind, *flag, str(path), "--no-figures"]
    else:
        _, args = _evaluation_export(kind, tmp_path, auth=False)
    out = tmp_path / "report"
    options = ["--authenticity-max-score", "2", "--authenticity-canary"]
    result = CliRunner().invoke(main, [*args, "--out", str(out), *options])
    assert result.exit_code == 1
    assert (
        "authenticity_canary cannot be applied: the data have no auth_canary column; "
        "authenticity_max_score cannot be applied: the data have no auth_score column"
        in result.output
    ), result.output
    assert "export the study again" in result.output
    assert not out.exists()


@pytest.mark.parametrize("kind", ["choice", "annotation"])
def test_an_empty_auth_column_is_refused_by_the_exclusion_step(kind):
    data = (_with_scores() if kind == "choice" else _labels_with_scores()).assign(
        auth_canary=np.nan
    )
    Rules, exclude = (
        (ChoiceRules, exclude_choice)
        if kind == "choice"
        else (AnnotationRules, exclude_annotations)
    )
    with pytest.raises(ValueError, match="auth_canary is empty in every row"):
        exclude(data, Rules(authenticity_canary=True))
    kept, _ = exclude(data, Rules(authenticity_max_score=2))  # the other rule reads auth_score
    assert kept["auth_score"].max() == 0


def test_the_rule_is_refused_when_its_column_is_empty_in_every_row(tmp_path):
    from analysis.exclusions import RaterRules
    from analysis.io import load_ratings
    from analysis.report.evaluation import analyze_ratings

    _evaluation_export("ratings", tmp_path)
    ratings = load_ratings(tmp_path / "long.csv").assign(auth_score=pd.NA)
    with pytest.raises(ValueError, match="auth_score is empty in every row"):
        analyze_ratings(ratings, rules=RaterRules(authenticity_max_score=2), n_boot=10)


def test_the_rater_rules_dict_names_the_rule_only_when_it_is_on():
    from analysis.exclusions import RaterRules

    assert RaterRules().as_dict() == {}
    assert RaterRules(authenticity_max_score=2).as_dict() == {
        "authenticity": {"max_score": 2, "canary": False}
    }
