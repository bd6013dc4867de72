"""The figures draw from the statistics' tables, including the edge cases they produce."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd

from analysis.plots.ratings import plot_order_consistency, plot_preference_by_bin
from analysis.stats.preferences import mark_reference, order_consistency, preference_by_bin

matplotlib.use("Agg")


def test_shares_of_zero_and_one_draw():
    # Shares of 0 and 1: Wilson bounds can sit a rounding error inside them (0/3 gives a lower
    # bound of 5.6e-17), which must not become negative error bars.
    rows = [
        {
            "participant_id": f"r{i % 3}",
            "pair_id": f"p{i}",
            "system_first": "human",
            "system_second": "gpt",
            # r2 always takes the second summary: a share of 0 over n = 3.
            "chosen_system": "gpt" if i % 3 == 2 else "human",
        }
        for i in range(9)
    ]
    marked = mark_reference(pd.DataFrame(rows)).assign(similarity=0.3)
    per_rater = order_consistency(marked)
    assert per_rater["share_first"].tolist() == [1.0, 1.0, 0.0]
    ax = plot_order_consistency(per_rater)
    assert ax.get_xlabel() == "share choosing the summary shown first"
    shares = preference_by_bin(marked, bins=2)
    ax = plot_preference_by_bin(shares)
    assert len(ax.get_lines()) >= 2  # the system's line and the 0.5 reference
    plt.close("all")
