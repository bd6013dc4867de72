"""PoliSum extraction analyses as Deas & McKeown (COLING 2025) define them.

Arousal as the density of highly arousing terms (beside the mean arousal kept before), and
coverage by perspective: each perspective's summaries on passages of its own and the opposite
side. The paper's equation numbers could not be checked offline; tests quote the definitions.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.cli.metrics import metrics
from analysis.metrics.extraction import (
    arousal_density,
    coverage_by,
    coverage_by_perspective,
    extraction_coverage,
    high_arousal_threshold,
    passage_arousal,
)
from analysis.plots.perspective import plot_coverage_by_perspective

LEXICON = {"riot": 0.95, "war": 0.9, "anger": 0.8, "tax": 0.45, "calm": 0.1}


def test_arousal_density_known_values():
    """density = |{t in passage : arousal(t) >= τ}| / |passage tokens|, τ = 0.75 on NRC VAD v1.

    "war and anger over a tax" has 6 tokens; "war" (0.9) and "anger" (0.8) are >= 0.75, "tax"
    (0.45) is a lexicon term but not highly arousing: density 2/6. Its mean arousal over the
    lexicon terms is (0.9 + 0.8 + 0.45)/3 = 0.7167: the two measures differ, and rank passages
    differently (below).
    """
    tokens = ["war", "and", "anger", "over", "a", "tax"]
    assert arousal_density(tokens, LEXICON) == pytest.approx(2 / 6)
    assert passage_arousal(tokens, LEXICON) == pytest.approx((0.9 + 0.8 + 0.45) / 3)
    assert arousal_density(tokens, LEXICON, threshold=0.85) == pytest.approx(1 / 6)
    assert math.isnan(arousal_density([], LEXICON))
    # The default cut-off is the top quarter of the lexicon's scale: v1 [0, 1], v2 [-1, 1].
    assert high_arousal_threshold(LEXICON) == 0.75
    assert high_arousal_threshold({**LEXICON, "calm": -0.9}) == 0.5


def test_density_and_mean_rank_passages_differently():
    # One riot word among 11 tokens vs a moderately arousing word repeated: the mean arousal
    # puts "tax tax" above the riot passage (0.45 > 0.3125), the density below it (0 < 1/11).
    long_calm = "riot " + "calm " * 3 + "and so on and on and on"
    short = "tax tax"
    data = pd.DataFrame(
        {
            "model": ["m"],
            "passages": [[long_calm, short, "war"]],
            "summary": ["war riot"],
        }
    )
    table = extraction_coverage(data, lexicon=LEXICON)
    assert table["arousal"].round(4).tolist() == [round((0.95 + 0.3) / 4, 4), 0.45, 0.9]
    assert table["arousal_density"].round(4).tolist() == [round(1 / 11, 4), 0.0, 1.0]
    by_density = coverage_by(table, by="arousal_density", n_bins=3)
    assert by_density["by"].unique().tolist() == ["arousal_density"]
    assert by_density["n"].sum() == 3
    # Without a lexicon both are NaN.
    assert extraction_coverage(data)["arousal_density"].isna().all()


def _perspective_table() -> pd.DataFrame:
    rows = []
    # Left summaries copy left passages (coverage 1) and nothing of right ones; right summaries
    # take half of right passages and a quarter of left ones.
    for model in ("m1", "m2"):
        for perspective, cov in (("left", {"left": 1.0, "right": 0.0}),
                                 ("right", {"left": 0.25, "right": 0.5})):  # fmt: skip
            for passage, side in enumerate(["left", "right", "left", "right"], start=1):
                rows.append(
                    {"model": model, "perspective": perspective, "side": side,
                     "passage": passage, "coverage": cov[side]}
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_coverage_by_perspective_known_values():
    out = coverage_by_perspective(_perspective_table(), group=())
    cells = out.set_index(["perspective", "side", "passage"])["coverage"]
    assert cells["left", "left", 1] == 1.0 and cells["left", "right", 2] == 0.0
    assert cells["right", "left", 3] == 0.25 and cells["right", "right", 4] == 0.5
    assert out["n"].unique().tolist() == [2]  # two models per cell
    assert out.loc[out["same_side"], "coverage"].tolist() == [1.0, 1.0, 0.5, 0.5]
    with pytest.raises(ValueError, match="needs a 'perspective' column"):
        coverage_by_perspective(_perspective_table().drop(columns="perspective"))


def test_coverage_by_perspective_figure():
    fig, ax = plt.subplots()
    plot_coverage_by_perspective(coverage_by_perspective(_perspective_table()), ax)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [
        "left summary ← left passages",
        "left summary ← right passages",
        "right summary ← left passages",
        "right summary ← right passages",
    ]
    # Each line holds the passages of its side, at their positions in the input.
    assert list(ax.get_lines()[0].get_xdata()) == [1, 3]
    assert list(ax.get_lines()[0].get_ydata()) == [1.0, 1.0]
    plt.close(fig)


def test_extraction_command_writes_density_and_perspective(examples, tmp_path):
    result = CliRunner().invoke(
        metrics,
        ["extraction", "-i", str(examples / "records.jsonl"), "-o", str(tmp_path),
         "--lexicon", str(examples / "vad.txt"), "--high-arousal", "0.55"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    passages = pd.read_csv(tmp_path / "extraction_passages.csv")
    # "Raising the minimum wage lifts families out of poverty." : poverty (0.60) is the one
    # term >= 0.55 among its 9 tokens.
    first = passages.loc[(passages["perspective"] == "left") & (passages["passage"] == 1)]
    assert first["arousal_density"].iloc[0] == pytest.approx(1 / 9)
    assert (tmp_path / "extraction_by_arousal_density.csv").exists()
    by_side = pd.read_csv(tmp_path / "extraction_by_perspective.csv")
    assert set(by_side["side"]) == {"left", "right"}
    assert (tmp_path / "extraction_by_perspective.png").stat().st_size > 0
