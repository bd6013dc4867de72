"""MTurk both ways: an ExternalQuestion pointing at the platform, or a native MTurk batch.

External: :func:`external_question_xml` is the ``Question`` of a HIT whose workers do the
whole study here (entry, consent, qualification, reserved batch, submit back to MTurk).

Native batch: :func:`write_batch` writes a crowd-html layout (one item per HIT, the labels as
radio choices) and the input CSV; MTurk's "Batch results" files come back through
:func:`import_batch_results` into the same tables as web labels, so allocation counts,
exports and shift counts treat them alike. A file is imported whole or not at all: one
malformed row refuses it, with a reason per row.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from pathlib import Path
from urllib.parse import urlsplit
from xml.sax.saxutils import escape as xml_escape

from sqlalchemy import select

from webapp.definition import TaskBlock
from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import (
    Annotation,
    AnnotationItem,
    Participant,
    ParticipantStatus,
    Platform,
    PlatformIdentity,
    Study,
)
from webapp.services.allocation import annotation_blocks, confirm_import, slot_rules, sync_items
from webapp.services.entry import canonical_id

EXTERNAL_QUESTION_NS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
    "ExternalQuestion.xsd"
)
STANDARD_COLUMNS = ("HITId", "AssignmentId", "WorkerId", "AssignmentStatus")
DEFAULT_ITEM_COL = "Input.item_id"
DEFAULT_LABEL_COL = "Answer.sentiment.label"
DEFAULT_BASE_COL = "Input.base_sentiment"


class MTurkError(ValueError):
    """The study or the arguments cannot be used with MTurk (message for the researcher)."""


def _block(study: Study) -> TaskBlock:
    blocks = annotation_blocks(study)
    if not blocks:
        raise MTurkError(f"study {study.slug!r} has no sentiment_annotation block")
    return blocks[0]


def external_question_xml(study: Study, base_url: str, frame_height: int = 0) -> str:
    """Return the ExternalQuestion XML of a HIT that runs the study on this platform.

    Parameters
    ----------
    study : Study
        Must accept the ``mturk`` platform.
    base_url : str
        Public HTTPS address of the platform (MTurk only frames HTTPS pages).
    frame_height : int
        Frame height in pixels; 0 lets MTurk use the whole window.

    Returns
    -------
    str
        The XML document. MTurk appends ``assignmentId``, ``hitId``, ``turkSubmitTo`` and
        ``workerId`` to the URL, which is how the entry page recognises MTurk.
    """
    parts = urlsplit(base_url.strip())
    if parts.scheme != "https" or not parts.netloc:
        raise MTurkError(
            "the platform's public address must start with https:// (MTurk frames only HTTPS "
            f"pages; set FRAMELAB_PUBLIC_URL, or give --url on the command line): {base_url!r}"
        )
    if parts.query or parts.fragment:
        # The participant's URL is ADDRESS/s/SLUG: a query or fragment here would be lost.
        raise MTurkError(
            "the platform's public address must not have a query string or #fragment "
            f"(the study's page is ADDRESS/s/SLUG): {base_url!r}"
        )
    if "mturk" not in study_definition(study).recruitment.platforms:
        raise MTurkError(f"study {study.slug!r} does not list mturk in recruitment.platforms")
    url = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}/s/{study.slug}"
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_NS}">\n'
        f"  <ExternalURL>{xml_escape(url)}</ExternalURL>\n"
        f"  <FrameHeight>{int(frame_height)}</FrameHeight>\n"
        "</ExternalQuestion>\n"
    )


def layout_html(block: TaskBlock, title: str) -> str:
    """Return the crowd-html layout of one HIT: the statement and the labels as radio choices.

    ``crowd-classifier`` renders the categories as a radio group and returns the choice as
    ``Answer.sentiment.label`` in the batch results (the importer's default column).
    """
    rules = slot_rules(block)
    categories = ", ".join(f"'{label.title()}'" for label in rules.labels)
    instructions = escape(rules.instructions or rules.prompt)
    k = rules.annotators_per_item
    return f"""<!-- FrameLab layout for MTurk (one statement per HIT), for a "Custom" project.
     ${{text}} comes from the input CSV. Set "Number of assignments per task" to {k}:
     MTurk then has {k} different workers label each statement. -->
<script src="https://assets.crowd.aws/crowd-html-elements.js"></script>
<crowd-form answer-format="flatten-objects">
  <crowd-classifier name="sentiment" categories="[{escape(categories, quote=False)}]"
                    header="{escape(rules.prompt)}">
    <classification-target>${{text}}</classification-target>
    <full-instructions header="{escape(title)}">
      <p>{instructions}</p>
    </full-instructions>
    <short-instructions>
      <p>{instructions}</p>
    </short-instructions>
  </crowd-classifier>
</crowd-form>
"""


def write_batch(study: Study, out_dir: str | Path) -> tuple[Path, Path, int]:
    """Write ``layout.html`` and ``input.csv`` for a native MTurk batch of the study's items.

    Parameters
    ----------
    study : Study
    out_dir : str or Path
        Created if missing.

    Returns
    -------
    layout, input_csv : Path
    n_items : int
        Rows of the input CSV (the non-gold items; columns ``item_id``, ``text``,
        ``base_sentiment`` and the extra item columns, which MTurk returns as ``Input.*``).
    """
    block = _block(study)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    layout = out / "layout.html"
    layout.write_text(layout_html(block, study.title), encoding="utf-8")
    items = slot_rules(block).items
    extra: list[str] = []
    for it in items:
        extra += [c for c in it["extra"] if c not in extra]
    input_csv = out / "input.csv"
    with input_csv.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["item_id", "text", "base_sentiment", *extra])
        for it in items:
            writer.writerow(
                [
                    it["item_id"],
                    it["text"],
                    it["base_sentiment"],
                    *(it["extra"].get(c, "") for c in extra),
                ]
            )
    return layout, input_csv, len(items)


@dataclass
class FileReport:
    """What happened to one batch-results file."""

    path: Path
    imported: int = 0
    counted: int = 0
    surplus: int = 0
    skipped: list[str] = field(default_factory=list)  # rejected or already imported rows
    problems: list[str] = field(default_factory=list)  # malformed rows: the file is refused

    @property
    def refused(self) -> bool:
        """True when nothing was imported because of malformed rows or columns."""
        return bool(self.problems)


@dataclass(frozen=True)
class _Row:
    line: int
    worker: str
    assignment: str
    hit: str
    item: AnnotationItem
    label: str
    rt_ms: int | None


def _read_rows(
    path: Path,
    study: Study,
    block: TaskBlock,
    report: FileReport,
    cols: tuple[str, str, str],
) -> list[_Row]:
    item_col, label_col, base_col = cols
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
            raw_rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        report.problems.append(f"cannot read the file: {exc}")
        return []
    missing = [c for c in (*STANDARD_COLUMNS, item_col, label_col, base_col) if c not in header]
    if missing:
        report.problems.append(
            f"missing column(s) {', '.join(missing)} (use --item-col/--label-col/--base-col "
            "for custom names)"
        )
        return []
    labels = slot_rules(block).labels
    items = {
        it.item_id: it
        for it in db.session.scalars(
            select(AnnotationItem).where(
                AnnotationItem.study_id == study.id, AnnotationItem.block_id == block.id
            )
        )
    }
    done = set(
        db.session.scalars(
            select(Annotation.external_ref)
            .join(AnnotationItem, AnnotationItem.id == Annotation.item_pk)
            .where(AnnotationItem.study_id == study.id, Annotation.external_ref.is_not(None))
        )
    )
    earlier = {
        (ident.external_id, item_pk)
        for ident, item_pk in db.session.execute(
            select(PlatformIdentity, Annotation.item_pk)
            .join(Annotation, Annotation.participant_id == PlatformIdentity.participant_id)
            .where(
                PlatformIdentity.study_id == study.id,
                PlatformIdentity.platform == Platform.mturk_batch,
            )
        )
    }
    seen: dict[tuple[str, str], int] = {}
    rows: list[_Row] = []
    for line, raw in enumerate(raw_rows, start=2):
        where = f"row {line}"
        if (raw.get("AssignmentStatus") or "").strip().lower() == "rejected":
            report.skipped.append(f"{where}: rejected assignment, not imported")
            continue
        worker = (raw.get("WorkerId") or "").strip()
        assignment = (raw.get("AssignmentId") or "").strip()
        item_id = (raw.get(item_col) or "").strip()
        label = (raw.get(label_col) or "").strip().lower()
        base = (raw.get(base_col) or "").strip().lower()
        reasons = []
        if not worker:
            reasons.append("WorkerId is empty")
        elif canonical_id(Platform.mturk_batch, worker) is None:
            reasons.append(f"WorkerId {worker!r} is not an MTurk worker ID")
        else:  # one spelling per worker, as at the entry page
            worker = canonical_id(Platform.mturk_batch, worker) or worker
        if not assignment:
            reasons.append("AssignmentId is empty")
        item = items.get(item_id)
        if item is None or item.is_gold:
            reasons.append(f"{item_col} {item_id!r} is not an item of this study")
        elif base != item.base_sentiment:
            reasons.append(f"{base_col} {base!r} differs from the item's {item.base_sentiment!r}")
        if label not in labels:
            reasons.append(f"{label_col} {label!r} is not one of {labels}")
        rt_ms = None
        seconds = (raw.get("WorkTimeInSeconds") or "").strip()
        if seconds:
            try:
                rt_ms = int(round(float(seconds) * 1000))
            except ValueError:
                reasons.append(f"WorkTimeInSeconds {seconds!r} is not a number")
        if assignment in done:
            report.skipped.append(f"{where}: assignment {assignment} was imported before")
            continue
        if worker and (worker, item_id) in seen:
            reasons.append(
                f"worker {worker} labelled {item_id!r} already in row {seen[worker, item_id]}"
            )
        elif item is not None and (worker, item.id) in earlier:
            reasons.append(f"worker {worker} labelled {item_id!r} in an earlier import")
        if reasons:
            report.problems.append(f"{where}: " + "; ".join(reasons))
            continue
        assert item is not None
        seen[worker, item_id] = line
        rows.append(
            _Row(line, worker, assignment, (raw.get("HITId") or "").strip(), item, label, rt_ms)
        )
    return rows


def _batch_participant(study: Study, row: _Row, now: datetime) -> Participant:
    from webapp.services.entry import add_participant

    found = db.session.scalar(
        select(Participant)
        .join(PlatformIdentity, PlatformIdentity.participant_id == Participant.id)
        .where(
            PlatformIdentity.study_id == study.id,
            PlatformIdentity.platform == Platform.mturk_batch,
            PlatformIdentity.external_id == row.worker,
        )
    )
    if found is not None:
        return found
    return add_participant(
        study,
        platform=Platform.mturk_batch,
        external_id=row.worker,
        now=now,
        seed=0,  # nothing to randomise: MTurk chose the items
        sequence="A",
        status=ParticipantStatus.completed,
        block_index=len(study_definition(study).tasks),
        finished_at=now,
        external_study_id=row.hit or None,
    )


def import_batch_results(
    study: Study,
    paths: list[str | Path],
    *,
    now: datetime,
    item_col: str = DEFAULT_ITEM_COL,
    label_col: str = DEFAULT_LABEL_COL,
    base_col: str = DEFAULT_BASE_COL,
) -> list[FileReport]:
    """Import MTurk "Batch results" CSVs as labels of the study's annotation block.

    Each file is checked completely first; a file with a missing column or any malformed row
    is refused whole (its report lists one reason per row) and the next file is tried.
    Accepted files are committed one by one. Rejected assignments and assignments imported
    before are skipped, not errors. Workers become ``mturk_batch`` participants; each label
    is counted while its item has fewer than ``annotators_per_item`` labels, and kept as
    surplus beyond that.

    Parameters
    ----------
    study : Study
    paths : list of path
    now : datetime
    item_col, label_col, base_col : str
        Columns with the item ID, the worker's label and the item's base sentiment
        (labels and sentiments match case-insensitively).

    Returns
    -------
    list of FileReport
        One per file, in order.
    """
    block = _block(study)
    if sync_items(study):
        db.session.commit()
    reports = []
    for path in paths:
        report = FileReport(Path(path))
        reports.append(report)
        rows = _read_rows(Path(path), study, block, report, (item_col, label_col, base_col))
        if report.refused:
            db.session.rollback()
            continue
        next_index: dict[int, int] = defaultdict(int)
        # Items in key order: the locks are then taken in the order concurrent waiters use.
        for row in sorted(rows, key=lambda r: (r.item.id, r.line)):
            p = _batch_participant(study, row, now)
            if p.id not in next_index:
                next_index[p.id] = len(
                    db.session.scalars(
                        select(Annotation.id).where(Annotation.participant_id == p.id)
                    ).all()
                )
            a = confirm_import(
                row.item,
                p,
                row.label,
                k=slot_rules(block).annotators_per_item,
                trial_index=next_index[p.id],
                rt_ms=row.rt_ms,
                now=now,
                external_ref=row.assignment,
            )
            next_index[p.id] += 1
            db.session.flush()
            report.imported += 1
            report.surplus += int(a.surplus)
            report.counted += int(not a.surplus)
        db.session.commit()
    return reports
