"""BERTScore of perspective summaries with ``bert-score`` from a local checkpoint
(PoliSum, Deas & McKeown 2025, scores summaries with BERTScore)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.cli.metrics import metrics
from analysis.metrics.bertscore import bertscore, bertscore_means, default_num_layers

CAND = ["the council raised school spending", "raising minimum wage lifts families"]
REFS = ["schools get more money", "raising minimum wage lifts families out of poverty"]


def _by_hand(model_dir: Path, cand: str, ref: str, layer: int) -> tuple[float, float, float]:
    """BERTScore from the definition (Zhang et al. 2020, §3), without the package.

    x = reference token embeddings, x̂ = candidate ones, from layer ``layer``, L2-normalised:
    R = mean_i max_j x_iᵀx̂_j, P = mean_j max_i x_iᵀx̂_j, F = 2PR / (P + R). As in the
    authors' package, the means run over the word pieces ([CLS]/[SEP] weigh 0) while the max
    may match a [CLS]/[SEP] embedding of the other text.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModel.from_pretrained(str(model_dir)).eval()

    def embed(text: str) -> np.ndarray:
        enc = tok(text, return_tensors="pt")
        with torch.no_grad():
            states = model(**enc, output_hidden_states=True).hidden_states[layer][0]
        vecs = states.numpy()
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    x, x_hat = embed(ref), embed(cand)
    sim = x @ x_hat.T
    # Rows: reference pieces, columns: candidate pieces; [CLS]/[SEP] are first and last.
    r = sim[1:-1].max(axis=1).mean()
    p = sim[:, 1:-1].max(axis=0).mean()
    return p, r, 2 * p * r / (p + r)


@pytest.mark.slow
def test_bertscore_matches_the_definition(tiny_bert):
    out = bertscore(CAND, REFS, model=tiny_bert, num_layers=2)
    assert list(out.columns) == ["bertscore_p", "bertscore_r", "bertscore_f"]
    for i in range(2):
        p, r, f = _by_hand(tiny_bert, CAND[i], REFS[i], layer=2)
        assert out.loc[i, "bertscore_p"] == pytest.approx(p, abs=1e-5)
        assert out.loc[i, "bertscore_r"] == pytest.approx(r, abs=1e-5)
        assert out.loc[i, "bertscore_f"] == pytest.approx(f, abs=1e-5)
    # Layer 1 is another layer's embeddings: another score.
    p1, _, _ = _by_hand(tiny_bert, CAND[0], REFS[0], layer=1)
    assert bertscore(CAND[:1], REFS[:1], model=tiny_bert, num_layers=1).loc[
        0, "bertscore_p"
    ] == pytest.approx(p1, abs=1e-5)
    # A text scored against itself has P = R = F = 1.
    same = bertscore(REFS, REFS, model=tiny_bert, num_layers=2)
    assert same.to_numpy() == pytest.approx(np.ones((2, 3)), abs=1e-5)


def test_bertscore_refuses_what_it_cannot_use(tmp_path, tiny_bert):
    with pytest.raises(ValueError, match="local checkpoint directory"):
        bertscore(CAND, REFS, model="roberta-large")
    with pytest.raises(ValueError, match="must pair up"):
        bertscore(CAND, REFS[:1], model=tiny_bert)
    assert bertscore([], [], model=tiny_bert).empty
    # A folder that holds no checkpoint is a clear error, not a traceback from transformers.
    with pytest.raises(ValueError, match="cannot load a BERTScore checkpoint"):
        bertscore(CAND, REFS, model=tmp_path)


def test_default_layer(tmp_path, tiny_bert):
    # Unknown names use the checkpoint's last layer; a copy of a published model is looked up.
    assert default_num_layers(tiny_bert) == 2
    named = tmp_path / "roberta-large"
    named.mkdir()
    assert default_num_layers(named) == 17


@pytest.mark.slow
def test_extraction_command_scores_against_the_perspective_reference(examples, tmp_path,
                                                                      tiny_bert):  # fmt: skip
    records = []
    for line in (examples / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["task"] == "perspective-summary":
            rec["input"]["left_summary"] = "raising minimum wage lifts families out of poverty"
            rec["input"]["right_summary"] = "small businesses say higher floors cut jobs"
            records.append(rec)
    path = tmp_path / "persp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        metrics,
        ["extraction", "-i", str(path), "-o", str(out), "--bertscore-model", str(tiny_bert)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "perspective_bertscore.csv")
    assert len(table) == len(records)
    left = table.loc[table["perspective"] == "left"].iloc[0]
    assert left["reference"] == "raising minimum wage lifts families out of poverty"
    direct = bertscore([left["summary"]], [left["reference"]], model=tiny_bert)
    # The command scores all records in one padded batch, the direct call one pair: float32
    # sums of a different shape agree to about 1e-7 of the value (on the x 100 scale, not 1e-6).
    assert left["bertscore_f"] == pytest.approx(direct.loc[0, "bertscore_f"], rel=1e-5)
    means = pd.read_csv(out / "perspective_bertscore_means.csv")
    assert means["n"].sum() == len(records)
    assert means["bertscore_f"].max() > 1  # the x 100 scale of the paper's table
    assert set(means["perspective"]) == {"left", "right"}


def test_bertscore_means_by_group():
    table = pd.DataFrame(
        {"model": ["a", "a", "b"], "perspective": ["left"] * 3,
         "bertscore_p": [0.5, 0.7, 0.9], "bertscore_r": [0.4, 0.6, 0.8],
         "bertscore_f": [0.45, 0.65, 0.85]}
    )  # fmt: skip
    out = bertscore_means(table).set_index("model")
    # Reported x 100, as PoliSum's Table 3 does.
    assert out.loc["a", "n"] == 2 and out.loc["a", "bertscore_p"] == pytest.approx(60.0)
    assert out.loc["b", "bertscore_f"] == pytest.approx(85.0)
    assert bertscore_means(table, scale=1).set_index("model").loc["a", "bertscore_p"] == (
        pytest.approx(0.6)
    )
