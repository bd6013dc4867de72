"""A German study paid in euros with three formats and product images, written from the docs
(docs/platform.md "Product choice with k formats", docs/languages.md, docs/recruit.md's
``payment:``, docs/analysis.md's ``analysis:`` block) the way a researcher would write one."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.webapp.conftest import ROOT

IMAGES = ROOT / "stimuli" / "studies" / "product_pairs" / "images"

STUDY = """\
slug: preise-in-euro
title: Produktwahl mit drei Formaten
language: de
estimated_minutes: 8

recruitment:
  platforms: [prolific, link]
  completion_codes:
    completed: EURO2026
    screened_out: EUROSCRN

payment:
  currency: EUR
  base: 2.50
  bonus: {amount: 0.10, rule: majority_choice}

analysis:
  hypothesis: Eine entschärfte Zusammenfassung senkt den Anteil der Zielwahl.
  test: choice_glmm
  levels: [summary, "mitigated:self-debias"]
  direction: less
  alpha: 0.025
  planned_n: 90

tasks:
  - type: consent
    id: consent
    text: Die Teilnahme ist freiwillig.
  - type: product_choice
    id: wahl
    pairs: paare.yaml
    formats: [original, summary, "mitigated:self-debias"]
    labels:
      original: Kundenbewertung
      summary: Zusammenfassung
      mitigated:self-debias: Zusammenfassung
    wtp:
      max_premium: 200
  - type: debrief
    id: debrief
    text: Vielen Dank!
"""


def _product(name: str, price: str, image: str, alt: str) -> str:
    return f"""\
      manufacturer: {name}
      price: {price}
      image: bilder/{image}
      image_alt: {alt}
      texts:
        original: Die Bewertung von {name}, wie geschrieben.
        summary: Eine Zusammenfassung der Bewertungen von {name}.
        mitigated:self-debias: Eine entschärfte Zusammenfassung zu {name}.
"""


def pairs_text() -> str:
    """Three pairs, each product with its image (the demo's images)."""
    out = ["pairs:"]
    for i in range(3):
        out.append(f"  - id: paar{i + 1}\n    product_type: Wasserkocher\n    target:")
        out.append(_product(f"Ziel{i + 1}", "84.50", "kettle-harbor.png", "Ein Wasserkocher"))
        out.append("    control:")
        out.append(_product(f"Andere{i + 1}", "79.00", "kettle-stillwater.png", "Ein Kessel"))
    return "\n".join(out)


def write_study(folder: Path, *, study: str = STUDY, pairs: str | None = None) -> Path:
    """Write the study, its pairs file and images into ``folder``; return the study file."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(IMAGES, folder / "bilder", dirs_exist_ok=True)
    (folder / "paare.yaml").write_text(pairs if pairs is not None else pairs_text())
    path = folder / "studie.yaml"
    path.write_text(study)
    return path
