"""Mechanism tests of the decoding-family logits processors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from analysis.mitigation import decoding as dec
from analysis.mitigation import guard, self_debias
from tests.analysis.mitigation.conftest import BEGIN, END, MIDDLE, REVIEW, SOURCE


def _ids(tokenizer, text: str) -> torch.Tensor:
    return torch.tensor([tokenizer.encode(text, add_special_tokens=False)], dtype=torch.long)


def _prompt_plus(tokenizer, prompt: str, output: str) -> tuple[torch.Tensor, int]:
    """A one-row ``input_ids`` holding a prompt then an output; returns it and the prompt length."""
    p = tokenizer.encode(prompt, add_special_tokens=False)
    o = tokenizer.encode(output, add_special_tokens=False) if output else []
    return torch.tensor([p + o], dtype=torch.long), len(p)


def test_part_coverage_scores_copied_third_highest():
    cov = dec.PartCoverage(SOURCE)
    sims = cov("alpha bravo charlie delta")
    assert sims[0] > 0.3
    assert sims[1] == 0 and sims[2] == 0
    assert np.allclose(cov(""), 0)


def test_forced_balanced_coverage_boosts_uncovered_thirds_by_log_gamma(tiny):
    _, tok = tiny
    ids, n_prompt = _prompt_plus(tok, "Summarize.", " alpha bravo charlie delta echo")
    proc = dec.ForcedBalancedCoverage([SOURCE], tok, n_prompt, gamma=1.5, tolerance=0.05)
    scores = torch.randn(1, len(tok), generator=torch.Generator().manual_seed(0))
    out = proc(ids, scores)
    diff = (out - scores)[0]
    parts = [set(tok.encode(p, add_special_tokens=False)) for p in proc.coverage[0].parts]
    boosted = (parts[1] | parts[2]) - parts[0]
    assert proc.boosted_parts == [[1, 2]]
    assert torch.allclose(diff[sorted(boosted)], torch.tensor(math.log(1.5)))
    untouched = [i for i in range(len(tok)) if i not in boosted]
    assert torch.all(diff[untouched] == 0)


def test_forced_balanced_coverage_leaves_balanced_output_alone(tiny):
    _, tok = tiny
    # Empty output and an output covering beginning and end alike: |s_b - s_e| <= 0.05.
    for output in ("", " alpha bravo uniform victor"):
        ids, n_prompt = _prompt_plus(tok, "Summarize.", output)
        proc = dec.ForcedBalancedCoverage([SOURCE], tok, n_prompt)
        scores = torch.randn(1, len(tok), generator=torch.Generator().manual_seed(3))
        assert torch.equal(proc(ids, scores), scores)


def test_weighted_token_decoding_scales_probabilities_by_the_stated_factors(tiny):
    _, tok = tiny
    factory = dec.WeightedTokenFactory()
    negative = dec.single_token_ids(tok, ["terrible", "awful", "hate"])
    assert len(negative) >= 3
    weights = factory.weights(tok, SOURCE, negative)
    middle = dec.single_token_ids(tok, dec.middle_keywords(SOURCE, 10))
    assert middle and set(middle) <= {t for t, f in weights.items() if f == 2.0}
    proc = dec.WeightedTokenDecoding([weights])
    scores = torch.randn(1, len(tok), generator=torch.Generator().manual_seed(1))
    p_in = torch.softmax(scores, -1)[0]
    p_out = torch.softmax(proc(torch.zeros(1, 1, dtype=torch.long), scores), -1)[0]
    neutral = next(i for i in range(len(tok)) if i not in weights)
    for token, factor in [(negative[0], 0.3), (middle[0], 2.0)]:
        ratio_in = p_in[token] / p_in[neutral]
        ratio_out = p_out[token] / p_out[neutral]
        assert float(ratio_out / ratio_in) == pytest.approx(factor, rel=1e-5)


def test_middle_keywords_come_from_the_middle_third():
    assert set(dec.middle_keywords(SOURCE, 10)) == set(MIDDLE.split())


NEWS = (
    "The U.S. economy grew in the third quarter, and the president said that the numbers were "
    "good for the workers of the country. "
    * 3
    + "In the middle of the year the central bank raised interest rates, and the mortgage "
    "market slowed as the housing demand fell in the suburbs of the big cities. "
    * 2
    + "At the end of the week the stock market rallied, and the traders in the city were "
    "happy with the gains of the day. " * 3
)


def test_middle_keywords_are_content_words_not_stop_words():
    """Old behaviour on this text: ['the', 'of', 'in', 'as', 'bank', …] ("the" got x2)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    keywords = dec.middle_keywords(NEWS, 10)
    assert len(keywords) == 10
    assert not set(keywords) & ENGLISH_STOP_WORDS
    assert {"mortgage", "housing", "bank", "demand"} <= set(keywords)
    assert dec.middle_keywords("the of and 12 34 to in a an the of and", 5) == []


def test_negative_words_are_vader_negatives():
    words = dec.negative_words()
    assert {"terrible", "awful", "hate"} <= set(words)
    assert "wonderful" not in words


def test_mirostat_v2_keeps_mean_observed_surprise_near_target():
    vocab = 1000
    # A Zipf distribution whose entropy (about 5.4 nats) is far above the target of 2 nats.
    logits = -1.1 * torch.log(torch.arange(1, vocab + 1, dtype=torch.float32))[None, :]
    entropy = float(-(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum())
    assert entropy > 4.0
    proc = dec.Mirostat(1, target=2.0, eta=0.1, variant="v2")
    gen = torch.Generator().manual_seed(0)
    ids = torch.zeros(1, 1, dtype=torch.long)
    for _ in range(2000):
        out = proc(ids, logits.clone())
        token = torch.multinomial(torch.softmax(out, -1), 1, generator=gen)
        ids = torch.cat([ids, token], dim=1)
    observed = np.concatenate(proc.observed)[200:]  # after mu settles from its start at 2 mu*
    assert observed.mean() == pytest.approx(2.0, abs=0.1)


def test_mirostat_v2_update_rule_follows_the_definition():
    proc = dec.Mirostat(1, target=2.0, eta=0.1, variant="v2")
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    first = proc(torch.zeros(1, 1, dtype=torch.long), logits)
    assert proc.mu[0] == pytest.approx(4.0)  # starts at 2 mu*; nothing observed yet
    chosen = torch.tensor([[0, 2]])  # the token drawn at step 1 is token 2
    s = -float(first[0, 2])
    proc(chosen, logits)
    assert proc.observed[0][0] == pytest.approx(s)
    assert proc.mu[0] == pytest.approx(4.0 - 0.1 * (s - 2.0))


def test_mirostat_v2_truncates_tokens_above_mu():
    proc = dec.Mirostat(1, target=0.5, eta=0.1, variant="v2")  # mu = 1.0 nat: keeps p >= e^-1
    probs = torch.tensor([[0.6, 0.3, 0.1]])
    out = proc(torch.zeros(1, 1, dtype=torch.long), torch.log(probs))
    assert torch.isinf(out[0, 1:]).all()
    assert float(out[0, 0]) == pytest.approx(0.0)


def test_mirostat_default_is_the_papers_temperature_feedback():
    """T_t = exp(mu_t); s_t = -ln p_t under the model; mu_{t+1} = mu_t - eta (s_t - mu*)."""
    proc = dec.Mirostat(1, target=2.0, eta=0.1)
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    first = proc(torch.zeros(1, 1, dtype=torch.long), logits)
    assert proc.mu[0] == 0.0  # T = 1: the model's own distribution, nothing cut
    assert torch.allclose(torch.softmax(first, -1), torch.tensor([[0.5, 0.3, 0.2]]))
    proc(torch.tensor([[0, 2]]), logits)  # token 2 (p = 0.2) was drawn at step 1
    s = -math.log(0.2)
    assert proc.observed[0][0] == pytest.approx(s)
    mu = -0.1 * (s - 2.0)
    assert proc.mu[0] == pytest.approx(mu)
    third = proc(torch.tensor([[0, 2, 1]]), logits)
    assert proc.observed[1][0] == pytest.approx(-math.log(0.3))  # the model's, not the tempered
    mu -= 0.1 * (-math.log(0.3) - 2.0)
    expected = torch.softmax(torch.log(torch.tensor([0.5, 0.3, 0.2])) / math.exp(mu), -1)
    assert torch.allclose(torch.softmax(third, -1)[0], expected, atol=1e-6)
    assert proc.temperatures[-1][0] == pytest.approx(math.exp(mu))


def test_mirostat_temperature_reaches_the_target_surprise():
    # Zipf logits: at T = 1 the sampled surprise is about 5 nats, far above the 2-nat target.
    logits = -1.1 * torch.log(torch.arange(1, 1001, dtype=torch.float32))[None, :]
    proc = dec.Mirostat(1, target=2.0, eta=0.1)
    gen = torch.Generator().manual_seed(0)
    ids = torch.zeros(1, 1, dtype=torch.long)
    for _ in range(1500):
        out = proc(ids, logits.clone())
        token = torch.multinomial(torch.softmax(out, -1), 1, generator=gen)
        ids = torch.cat([ids, token], dim=1)
    assert np.concatenate(proc.observed)[200:].mean() == pytest.approx(2.0, abs=0.1)
    assert float(proc.temperatures[-1][0]) < 1.0  # it had to cool the sampler


def test_mirostat_rejects_unknown_variants():
    with pytest.raises(ValueError, match="variant"):
        dec.MirostatFactory(variant="v3")


def test_self_debias_scales_tokens_with_negative_delta(tiny):
    model, tok = tiny
    enc = tok(["Summarize: " + REVIEW], return_tensors="pt", add_special_tokens=False)
    proc = self_debias.SelfDebiasDecoding(
        model, tok, enc["input_ids"], enc["attention_mask"], decay=10.0, refresh_every=4
    )
    assert len(proc.prefix_ids) <= 29
    with torch.inference_mode():
        scores = model(**enc).logits[:, -1, :]
        biased_ids = torch.tensor([proc.prefix_ids + enc["input_ids"][0].tolist()])
        p_bias = torch.softmax(model(input_ids=biased_ids).logits[:, -1, :], -1)
    out = proc(enc["input_ids"], scores)
    p_main = torch.softmax(scores, -1)
    delta = p_main - p_bias
    expected = p_main * torch.exp(10.0 * delta.clamp(max=0))
    assert torch.allclose(out.exp(), expected, atol=1e-6)
    assert bool((delta < 0).any()) and bool((delta >= 0).any())
    up = delta >= 0
    assert torch.allclose(out.exp()[up], p_main[up], atol=1e-7)


def test_self_debias_refreshes_the_biased_pass_every_four_steps(tiny):
    model, tok = tiny
    enc = tok(["Summarize: " + REVIEW], return_tensors="pt", add_special_tokens=False)
    proc = self_debias.SelfDebiasDecoding(model, tok, enc["input_ids"], enc["attention_mask"])
    ids = enc["input_ids"]
    for _ in range(5):
        proc(ids, torch.zeros(1, len(tok)))
        ids = torch.cat([ids, torch.tensor([[5]])], dim=1)
    assert proc.n_biased_passes == 2  # steps 0 and 4


def _scores_with_top(tok, ranking: list[int]) -> torch.Tensor:
    scores = torch.zeros(1, len(tok))
    for rank, token in enumerate(ranking):
        scores[0, token] = 10.0 - rank
    return scores


def test_rejection_sampling_drops_an_imbalancing_top_token(tiny):
    _, tok = tiny
    ids, n_prompt = _prompt_plus(tok, "Summarize.", " alpha bravo")
    begin = dec.single_token_ids(tok, BEGIN.split())
    middle = dec.single_token_ids(tok, MIDDLE.split())
    ranking = [begin[-1], *middle[:4]]
    proc = dec.RejectionSampling([SOURCE], tok, n_prompt, top_k=5)
    out = proc(ids, _scores_with_top(tok, ranking))
    assert proc.rejected == [(0, 0, ranking[0])]
    finite = torch.isfinite(out[0]).nonzero().ravel().tolist()
    assert sorted(finite) == sorted(ranking[1:])  # resampled within the rest of the top-5


def test_rejection_sampling_keeps_a_balancing_top_token(tiny):
    _, tok = tiny
    ids, n_prompt = _prompt_plus(tok, "Summarize.", " alpha bravo")
    end = dec.single_token_ids(tok, END.split())
    proc = dec.RejectionSampling([SOURCE], tok, n_prompt, top_k=5)
    scores = _scores_with_top(tok, end[:5])
    assert torch.equal(proc(ids, scores), scores)
    assert proc.rejected == []


def test_local_explanation_guard_rejects_sentiment_flips_at_check_steps(tiny):
    _, tok = tiny
    ids, n_prompt = _prompt_plus(tok, "Summarize.", " I hate it, terrible")
    negative = dec.single_token_ids(tok, ["awful", "horrible"])
    positive = dec.single_token_ids(tok, ["wonderful", "great", "love"])
    ranking = [negative[0], *positive[:2], negative[1]]
    proc = guard.LocalExplanationGuard([REVIEW], tok, n_prompt, check_every=5, top_k=4)
    assert proc.detect(0, " I hate it, terrible") == {
        "flipping_sentiment": pytest.approx(-proc._compound(" I hate it, terrible"))
    }
    scores = _scores_with_top(tok, ranking)
    for _ in range(5):  # steps 0-4: no check
        assert torch.equal(proc(ids, scores), scores)
    out = proc(ids, scores)  # step 5: check
    finite = set(torch.isfinite(out[0]).nonzero().ravel().tolist())
    assert finite == set(positive[:2])
    assert {c for _, _, c in proc.rejected} == {negative[0], negative[1]}


def test_local_explanation_guard_flags_an_ignored_middle(tiny):
    _, tok = tiny
    proc = guard.LocalExplanationGuard([SOURCE], tok, 0, min_words=10)
    found = proc.detect(0, BEGIN + " " + END)
    assert set(found) == {"ignoring_middle"}
    assert proc.detect(0, SOURCE) == {}
    assert proc.detect(0, "alpha uniform") == {}  # too short to judge


def test_local_explanation_guard_asks_the_model_to_explain_its_choice(tiny):
    """The explanation step: the model explains the chosen token; what it admits is checked."""
    from transformers import GenerationConfig

    from analysis.llm.backends.hf import format_messages
    from analysis.mitigation.prompts import step_template

    model, tok = tiny
    output = " alpha bravo"
    ids, n_prompt = _prompt_plus(tok, "Summarize.", output)
    proc = guard.LocalExplanationGuard(
        [SOURCE], tok, n_prompt, model=model, check_every=1, top_k=3, explain_tokens=8
    )
    scores = torch.randn(1, len(tok), generator=torch.Generator().manual_seed(2))
    proc(ids, scores)  # step 0: no check
    proc(ids, scores)  # step 1: explain, then check
    [entry] = proc.explanations
    choice = int(scores.argmax())
    assert entry["step"] == 1 and entry["token"] == choice
    # The same greedy answer the model gives to the explanation prompt on its own.
    messages = step_template("explain-choice").messages(
        text=SOURCE, summary=tok.decode(ids[0, n_prompt:]), token=tok.decode([choice]).strip()
    )
    enc = tok(format_messages(tok, messages), return_tensors="pt", add_special_tokens=False)
    config = GenerationConfig(max_new_tokens=8, do_sample=False, pad_token_id=tok.pad_token_id)
    with torch.inference_mode():
        direct = model.generate(**enc, generation_config=config)
    expected = tok.decode(direct[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    assert entry["text"] == expected.strip()


def test_local_explanation_guard_acts_on_what_the_explanation_admits(tiny, monkeypatch):
    """Balanced output (no rule fires); the explanation says it draws on the end: checked."""
    _, tok = tiny
    output = " alpha kilo uniform"  # one word of each third
    ids, n_prompt = _prompt_plus(tok, "Summarize.", output)
    proc = guard.LocalExplanationGuard(
        [SOURCE], tok, n_prompt, model=object(), check_every=1, top_k=4, min_words=3
    )
    assert proc.detect(0, tok.decode(ids[0, n_prompt:])) == {}
    end, begin = dec.single_token_ids(tok, ["victor"]), dec.single_token_ids(tok, ["bravo"])
    middle = dec.single_token_ids(tok, ["lima", "mike"])
    scores = _scores_with_top(tok, [end[0], begin[0], *middle[:2]])
    answer = "PART: end; SENTIMENT: kept; WHY: the end"
    monkeypatch.setattr(proc, "explain", lambda row, text, token: answer)
    proc(ids, scores)  # step 0: no check
    out = proc(ids, scores)
    assert proc.explanations[0]["admitted"] == ["ignoring_middle"]
    assert proc.flags == [(1, 0, "ignoring_middle")]
    assert set(torch.isfinite(out[0]).nonzero().ravel().tolist()) == set(middle[:2])
    answer = "PART: middle; SENTIMENT: kept"
    assert torch.equal(proc(ids, scores), scores)  # nothing admitted, nothing found


def test_parse_explanation_reads_part_and_sentiment():
    assert guard.parse_explanation("part - Beginning. Sentiment: opposite") == {
        "part": "beginning",
        "sentiment": "flipped",
    }
    assert guard.parse_explanation("") == {"part": None, "sentiment": None}


@pytest.mark.parametrize(
    "factory",
    [
        dec.BalancedCoverageFactory(),
        dec.WeightedTokenFactory(),
        dec.RejectionSamplingFactory(),
        self_debias.SelfDebiasFactory(),
        guard.ExplanationGuardFactory(),
    ],
    ids=lambda f: type(f).__name__,
)
def test_factories_run_inside_generate(tiny, factory):
    from transformers import LogitsProcessorList

    from analysis.llm.backends.base import BatchContext, Request

    model, tok = tiny
    reqs = [Request("a", ({"role": "user", "content": "x"},), text=SOURCE)] * 2
    enc = tok(["Summarize: " + SOURCE, "Summarize:"], return_tensors="pt", padding=True)
    ctx = BatchContext(reqs, enc["input_ids"], enc["attention_mask"], tok, model)
    with torch.inference_mode():
        out = model.generate(
            **enc,
            max_new_tokens=6,
            do_sample=False,
            logits_processor=LogitsProcessorList([factory(ctx)]),
            pad_token_id=tok.pad_token_id,
        )
    assert out.shape[1] <= enc["input_ids"].shape[1] + 6
    assert repr(factory).startswith(type(factory).__name__ + "(")


def _greedy(model, tok, enc, processors=()):
    from transformers import LogitsProcessorList

    with torch.inference_mode():
        out = model.generate(
            **enc,
            max_new_tokens=30,
            do_sample=False,
            pad_token_id=tok.pad_token_id,
            logits_processor=LogitsProcessorList(list(processors)),
        )
    return out[0, enc["input_ids"].shape[1] :].tolist()


def _source_opening_with(tok, generated: list[int]) -> str:
    """A source whose first third is made of the words the model produces unsteered."""
    import re

    words = re.findall(r"\b\w\w+\b", tok.decode(generated, skip_special_tokens=True).lower())
    assert words, "the unsteered output has no word to build the source from"
    return " ".join((words * 6)[:6]) + f" {MIDDLE} {END}"


def test_balanced_coverage_steers_generation_toward_uncovered_thirds(tiny):
    model, tok = tiny
    enc = tok(["Summarize: the battery"], return_tensors="pt", add_special_tokens=False)
    plain = _greedy(model, tok, enc)
    source = _source_opening_with(tok, plain)
    proc = dec.ForcedBalancedCoverage([source], tok, enc["input_ids"].shape[1])
    steered = _greedy(model, tok, enc, [proc])
    parts = [set(tok.encode(p, add_special_tokens=False)) for p in proc.coverage[0].parts]
    later = (parts[1] | parts[2]) - parts[0]
    assert any(proc.boosted_parts)  # the unsteered opening covers only the beginning
    assert steered != plain
    assert sum(t in later for t in steered) > sum(t in later for t in plain)


def test_rejection_sampling_changes_an_imbalanced_generation(tiny):
    model, tok = tiny
    enc = tok(["Summarize: the battery"], return_tensors="pt", add_special_tokens=False)
    plain = _greedy(model, tok, enc)
    source = _source_opening_with(tok, plain)
    proc = dec.RejectionSampling([source], tok, enc["input_ids"].shape[1])
    steered = _greedy(model, tok, enc, [proc])
    assert proc.rejected and steered != plain
