"""MTurk through boto3 (the AWS SDK: credentials from its usual chain — environment,
``~/.aws/credentials``, an instance role — never from FrameLab).

The sandbox is the default; the live marketplace only with ``production=True`` (the CLI's
``--production``); ``MTURK_ENDPOINT_URL`` overrides the endpoint. A listing made in one is
never driven from the other.

- ``create``: ``CreateHITType`` (reward, title, qualification requirements; MTurk returns the
  existing type for the same values) — nothing is posted yet — and, with
  ``block_screened_out``, a qualification type that workers screened out here receive, so
  the HIT does not let them in again (an earlier create's type is found by its name);
- ``publish``: ``CreateHITWithHITType`` with the study's ExternalQuestion, a
  ``UniqueRequestToken`` and a ``RequesterAnnotation`` that carries the token. MTurk answers a
  repeated token with ``HitAlreadyExists`` naming the HIT, which is then recorded; MTurk
  forgets tokens after 24 hours, so a publish that follows an unanswered one first looks the
  HIT up (``ListHITs``, by its annotation) and posts nothing when it exists. Publishing a
  paused HIT extends it again;
- ``pause`` and ``close``: ``UpdateExpirationForHIT`` to a past time (expires it now);
- ``status``: ``ListAssignmentsForHIT`` (reconciled into platform statuses);
- ``approve``/``reject``: ``ApproveAssignment``/``RejectAssignment`` (with feedback);
- ``bonus``: ``SendBonus`` with the ledger row's ``UniqueRequestToken``, each row claimed
  (:mod:`webapp.recruit.ledger`), looked up first with ``ListBonusPayments`` (every page: a
  bonus MTurk already lists, from a payment file or an earlier send whose outcome was
  unknown, is recorded paid and never sent again, even after MTurk forgot the token) and its
  assignment's status read (``GetAssignment``) just before: a rejected assignment gets none.
  Rows written to a payment file are never sent; ``ListBonusPayments`` confirms them.

MTurk approves a submitted assignment by itself once its HIT type's auto-approval delay has
passed (seven days here, :data:`AUTO_APPROVE_SECONDS`), paying the reward: the approval plan
shows each waiting assignment's ``AutoApprovalTime``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy import select

from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import (
    BonusPayment,
    Participant,
    ParticipantStatus,
    Platform,
    PlatformIdentity,
    Recruitment,
    utcnow,
)
from webapp.recruit import ledger
from webapp.recruit.base import (
    MAX_ATTEMPTS,
    Cost,
    NotSent,
    OutcomeUnknown,
    Recruiter,
    RecruitError,
    Refused,
    Report,
    Submission,
    fee,
    safe_text,
)
from webapp.recruit.bonus_actions import payable
from webapp.recruit.settings import MTURK_MASTERS, MTURK_SYSTEM_QUALIFICATIONS
from webapp.services.entry import canonical_spelling, mturk_id
from webapp.services.reconcile import MTURK_STATUS

SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
_THROTTLED = {"Throttling", "ThrottlingException", "TooManyRequestsException"}
_PAST = datetime(2015, 1, 1, tzinfo=UTC)  # UpdateExpirationForHIT: a past time expires now
AUTO_APPROVE_SECONDS = 7 * 24 * 3600  # MTurk approves unreviewed work after this
MAX_PAGES = 10_000
_ENTITY_ID = re.compile(r"\b[A-Z0-9]{20,64}\b")  # MTurk's EntityId, e.g. a HIT id


def _already_exists(response: dict[str, Any]) -> bool:
    """Whether an MTurk error answer says a HIT with this UniqueRequestToken exists."""
    text = f"{response.get('TurkErrorCode', '')} {response.get('Error', {}).get('Message', '')}"
    return "HitAlreadyExists" in text or "already exists" in text.lower()


def _dollars(amount: int) -> str:
    return f"{amount // 100}.{amount % 100:02d}"


class MTurkRecruiter(Recruiter):
    """A study as an MTurk ExternalQuestion HIT (see the module docstring for the calls)."""

    platform = Platform.mturk
    label = "MTurk"
    approve_status = "SUBMITTED"
    unconfirmed_note = (
        "the next run looks it up with ListBonusPayments and sends it (same token) only if "
        "MTurk has no such bonus"
    )
    resend_states = (ledger.PAYING,)

    def __init__(
        self, *args: Any, production: bool = False, client: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.sandbox = not production
        self.endpoint = os.environ.get("MTURK_ENDPOINT_URL") or (
            PRODUCTION_ENDPOINT if production else SANDBOX_ENDPOINT
        )
        self._client = client

    @property
    def client(self) -> Any:
        """A boto3 MTurk client (made on first use; retries are ours, so each is audited)."""
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise RecruitError(
                    "MTurk needs the AWS SDK: pip install 'framelab[mturk]' (boto3)"
                ) from None
            self._client = boto3.client(
                "mturk",
                region_name="us-east-1",
                endpoint_url=self.endpoint,
                config=Config(retries={"max_attempts": 1, "mode": "standard"}),
            )
        return self._client

    def call(self, operation: str, *, ids: dict[str, Any] | None = None, **params: Any) -> Any:
        """Call one MTurk operation; audit every attempt.

        Throttling, 5xx and lost answers are retried: every call here is idempotent (reads,
        calls carrying a UniqueRequestToken, transitions MTurk refuses to repeat), and a
        connection that never opened sent nothing.

        Raises
        ------
        NotSent
            No connection could be made: nothing was sent.
        Refused
            MTurk's answer refused it (``status`` is its error code; a repeated token's
            ``HitAlreadyExists`` is one, never retried).
        OutcomeUnknown
            No answer after every attempt: it may have been done.
        """
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
        from botocore.exceptions import ConnectionError as NoConnection

        endpoint = f"{self.endpoint}/{operation}"
        for attempt in range(1, MAX_ATTEMPTS + 1):
            last = attempt == MAX_ATTEMPTS
            self.release()
            try:
                resp = getattr(self.client, operation)(**params)
            except NoCredentialsError:
                raise RecruitError(
                    "no AWS credentials: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile "
                    "(the usual AWS credential chain)"
                ) from None
            except ClientError as exc:
                err = exc.response.get("Error", {})
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
                code = str(err.get("Code", ""))
                self.log_call("POST", endpoint, f"{status} {code}", ids=ids, attempt=attempt)
                transient = code in _THROTTLED or status >= 500 or code == "ServiceFault"
                if transient and not last and not _already_exists(exc.response):
                    self.backoff(attempt)
                    continue
                message = str(err.get("Message", ""))
                reason = safe_text(message)
                raise Refused(
                    f"MTurk refused {operation}: {code}: {reason}",
                    status=code,
                    reason=reason,
                    raw=f"{exc.response.get('TurkErrorCode', '')} {message}",
                ) from None
            except BotoCoreError as exc:
                sent = not isinstance(exc, NoConnection)
                what = f"{'error' if sent else 'not sent'}: {type(exc).__name__}"
                self.log_call("POST", endpoint, what, ids=ids, attempt=attempt)
                if not last:
                    self.backoff(attempt)
                    continue
                if not sent:
                    raise NotSent(
                        f"MTurk could not be reached for {operation} ({type(exc).__name__}); "
                        "nothing was sent"
                    ) from None
                raise OutcomeUnknown(
                    f"MTurk did not answer {operation} ({type(exc).__name__}); its outcome is "
                    "unknown"
                ) from None
            status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode", 200)
            self.log_call("POST", endpoint, status, ids=ids, attempt=attempt)
            return resp
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the listing ------------------------------------------------------------------------
    def _masters(self) -> bool:
        return any(q["type"] == "masters" for q in self.settings.qualifications)

    def cost(self, bonuses_cents: int) -> Cost:
        """Rewards, MTurk's commission (20%; +20% with 10 or more assignments; +5% Masters)
        and bonuses with their 20%."""
        s = self.settings
        rate = s.fee_rate + (0.2 if s.places >= 10 else 0.0) + (0.05 if self._masters() else 0.0)
        rewards = s.reward_cents * s.places
        return Cost(
            rewards=rewards,
            reward_fees=fee(rewards, rate),
            bonuses=bonuses_cents,
            bonus_fees=fee(bonuses_cents, s.fee_rate),
            fee_rate=rate,
            note=f"MTurk's commission: {rate:.0%} on rewards, {s.fee_rate:.0%} on bonuses"
            + (" (sandbox: nothing is paid)" if self.sandbox else ""),
        )

    def study_url(self, base_url: str) -> str:
        """The ExternalQuestion's URL (MTurk frames only https pages)."""
        from webapp.services.mturk import MTurkError, external_question_xml

        try:
            external_question_xml(self.study, base_url)
        except MTurkError as exc:
            raise RecruitError(str(exc)) from None
        return f"{base_url.strip().rstrip('/')}/s/{self.study.slug}"

    def requirements(self, qualification_type: str | None) -> list[dict[str, Any]]:
        """``QualificationRequirements`` from the settings (names mapped to MTurk's ids)."""
        out = []
        for q in self.settings.qualifications:
            kind = q["type"]
            if kind == "masters":
                type_id = MTURK_MASTERS["sandbox" if self.sandbox else "production"]
            else:
                type_id = MTURK_SYSTEM_QUALIFICATIONS.get(kind, kind)
            req: dict[str, Any] = {
                "QualificationTypeId": type_id,
                "Comparator": q["comparator"],
                "ActionsGuarded": "DiscoverPreviewAndAccept",
            }
            if "values" in q:
                req["IntegerValues"] = list(q["values"])
            if "locales" in q:
                req["LocaleValues"] = [dict(x) for x in q["locales"]]
            out.append(req)
        if qualification_type:
            out.append(
                {
                    "QualificationTypeId": qualification_type,
                    "Comparator": "DoesNotExist",
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                }
            )
        return out

    def _guard(self, row: Recruitment) -> None:
        if row.sandbox != self.sandbox:
            where = "the sandbox" if row.sandbox else "production"
            raise RecruitError(
                f"this study's HIT is in {where}; run the command "
                + ("without --production" if row.sandbox else "with --production")
            )

    def _qualification_name(self, row: Recruitment) -> str:
        return f"FrameLab {self.study.slug} screened out ({row.id})"

    def _pages(
        self, operation: str, key: str, *, ids: dict[str, Any] | None = None, **params: Any
    ) -> Iterator[dict[str, Any]]:
        """Every item under ``key`` of a paginated list operation (following NextToken)."""
        token = None
        for _ in range(MAX_PAGES):  # a bound instead of trusting NextToken forever
            page = {**params, "MaxResults": 100, **({"NextToken": token} if token else {})}
            resp = self.call(operation, ids=ids, **page)
            for item in resp.get(key) or []:
                if not isinstance(item, dict):
                    raise RecruitError(f"MTurk's answer to {operation} lists a non-object")
                yield item
            token = resp.get("NextToken")
            if not token:
                return

    def _find_qualification(self, name: str) -> str | None:
        """The id of this requester's qualification type called ``name``, if any."""
        for q in self._pages(
            "list_qualification_types",
            "QualificationTypes",
            Query=name,
            MustBeRequestable=False,
            MustBeOwnedByCaller=True,
        ):
            if q.get("Name") == name and q.get("QualificationTypeId"):
                return str(q["QualificationTypeId"])
        return None

    def _create(self, row: Recruitment, *, retrying: bool) -> tuple[str, str, dict[str, Any]]:
        s, d = self.settings, study_definition(self.study)
        qual_id = None
        if s.block_screened_out:
            name = self._qualification_name(row)
            qual_id = self._find_qualification(name) if retrying else None
            if qual_id is None:
                try:
                    resp = self.call(
                        "create_qualification_type",
                        Name=name,
                        Description=(
                            f"Workers who were screened out of the FrameLab study "
                            f"{self.study.slug}; its HIT is not shown to them again"
                        ),
                        QualificationTypeStatus="Active",
                    )
                    qual_id = resp["QualificationType"]["QualificationTypeId"]
                except Refused:  # MTurk refuses a second type of the same name: an earlier one
                    qual_id = self._find_qualification(name)
                    if qual_id is None:
                        raise
        resp = self.call(
            "create_hit_type",
            AutoApprovalDelayInSeconds=AUTO_APPROVE_SECONDS,
            AssignmentDurationInSeconds=s.assignment_minutes * 60,
            Reward=_dollars(s.reward_cents),
            Title=self.study.title,
            Keywords=s.keywords,
            Description=(d.description or self.study.title)[:2000],
            QualificationRequirements=self.requirements(qual_id),
        )
        hit_type = resp.get("HITTypeId")
        if not isinstance(hit_type, str) or not _ENTITY_ID.fullmatch(hit_type):
            raise RecruitError(f"MTurk's answer to CreateHITType has no HIT type id; {hit_type!r}")
        extra = {
            **row.extra,
            "hit_type_id": hit_type,
            **({"qualification_type_id": qual_id} if qual_id else {}),
        }
        return hit_type, "HIT TYPE CREATED", extra

    def _find_listing(self, row: Recruitment) -> tuple[str, str] | None:
        # CreateHITType returns the existing type for the same values, and the qualification
        # type is found by its name (``_create`` with ``retrying``): nothing to look up here.
        return None

    def _publish_token(self, row: Recruitment) -> tuple[str, str]:
        """The UniqueRequestToken of the listing's HIT and the annotation carrying it."""
        digest = hashlib.sha256(f"{self.study.slug}:hit:{row.id}".encode()).hexdigest()[:32]
        token = f"framelab-hit-{digest}"
        return token, f"framelab:{self.study.slug}:{token}"[:255]

    def _find_hit(self, annotation: str) -> dict[str, Any] | None:
        """The requester's HIT with this annotation (``ListHITs``, every page), if any."""
        for hit in self._pages("list_hits", "HITs"):
            if hit.get("RequesterAnnotation") == annotation and hit.get("HITId"):
                return hit
        return None

    def _record_hit(self, row: Recruitment, hit: dict[str, Any]) -> str:
        hit_id = hit.get("HITId")
        if not isinstance(hit_id, str) or not _ENTITY_ID.fullmatch(hit_id):
            raise RecruitError(f"MTurk's answer has no usable HIT id ({safe_text(repr(hit_id))})")
        row.extra = {**row.extra, "hit_id": hit_id}
        row.external_id = hit_id
        db.session.commit()
        return str(hit.get("HITStatus") or "Assignable")

    def _posted_hit(self, row: Recruitment, annotation: str, exc: Refused) -> dict[str, Any]:
        """The HIT a ``HitAlreadyExists`` answer names (checked), else the one ListHITs finds."""
        for candidate in _ENTITY_ID.findall(exc.raw):
            try:
                hit = self.call("get_hit", ids={"hit": candidate}, HITId=candidate).get("HIT", {})
            except Refused:
                continue
            if hit.get("RequesterAnnotation") == annotation:
                return dict(hit)
        hit = self._find_hit(annotation)
        if hit is None:
            raise RecruitError(
                f"MTurk says the HIT exists ({exc.reason}) but it cannot be found by its "
                "annotation; nothing more was posted"
            ) from None
        return hit

    def _transition(self, external_id: str, action: str) -> str:
        from webapp.services.mturk import external_question_xml

        row = self.listing_row()
        self._guard(row)
        if action == "publish":
            if row.status == "CLOSED":
                raise RecruitError("the HIT was closed; a closed HIT is not published again")
            if "hit_id" in row.extra:  # paused: make it findable again
                self.call(
                    "update_expiration_for_hit",
                    ids={"hit": row.extra["hit_id"]},
                    HITId=row.extra["hit_id"],
                    ExpireAt=utcnow() + timedelta(hours=self.settings.lifetime_hours),
                )
                return "Assignable"
            token, annotation = self._publish_token(row)
            if row.extra.get("publish_sent"):
                # An earlier publish got no answer; after 24 hours MTurk would take the same
                # token for a new HIT, so the HIT it may have posted is looked up first.
                hit = self._find_hit(annotation)
                if hit is not None:
                    return self._record_hit(row, hit)
            row.extra = {**row.extra, "publish_sent": utcnow().isoformat()}
            db.session.commit()  # before the call: the next publish then looks first
            base = row.external_url.rsplit("/s/", 1)[0]
            try:
                resp = self.call(
                    "create_hit_with_hit_type",
                    ids={"hit_type": row.extra["hit_type_id"]},
                    HITTypeId=row.extra["hit_type_id"],
                    MaxAssignments=self.settings.places,
                    LifetimeInSeconds=int(self.settings.lifetime_hours * 3600),
                    Question=external_question_xml(self.study, base),
                    RequesterAnnotation=annotation,
                    UniqueRequestToken=token,
                )
            except Refused as exc:
                if not _already_exists({"TurkErrorCode": exc.raw}):
                    raise
                return self._record_hit(row, self._posted_hit(row, annotation, exc))
            return self._record_hit(row, resp.get("HIT") or {})
        hit_id = row.extra.get("hit_id")
        if not hit_id:
            raise RecruitError("the HIT is not published yet; nothing to pause or close")
        self.call("update_expiration_for_hit", ids={"hit": hit_id}, HITId=hit_id, ExpireAt=_PAST)
        return "PAUSED" if action == "pause" else "CLOSED"

    def _settle_listing(self, row: Recruitment, report: Report) -> None:
        """Record the HIT a publish posted whose answer was lost (found by its annotation)."""
        if "hit_id" in row.extra or not row.extra.get("publish_sent"):
            return
        self._guard(row)
        hit = self._find_hit(self._publish_token(row)[1])
        if hit is None:
            report.lines.append("the interrupted publish posted no HIT; `publish` can run again")
            return
        row.status = self._record_hit(row, hit)
        db.session.commit()
        report.lines.append(f"found HIT {row.external_id} posted by the interrupted publish")

    def fetch_submissions(self, external_id: str) -> list[Submission]:
        row = self.listing_row()
        self._guard(row)
        hit_id = row.extra.get("hit_id")
        if not hit_id:
            return []
        out: list[Submission] = []
        items = self._pages(
            "list_assignments_for_hit", "Assignments", ids={"hit": hit_id}, HITId=hit_id
        )
        for n, a in enumerate(items, start=1):
            assignment, worker, status = (
                a.get("AssignmentId"),
                a.get("WorkerId"),
                a.get("AssignmentStatus"),
            )
            if not all(isinstance(v, str) and v for v in (assignment, worker, status)):
                raise RecruitError(
                    f"MTurk's list of assignments has an entry without an id, worker or status "
                    f"(entry {n}); nothing was changed"
                )
            auto = a.get("AutoApprovalTime")
            out.append(
                Submission(
                    submission_id=assignment,
                    worker_id=canonical_spelling(Platform.mturk, worker),
                    status=MTURK_STATUS.get(status.lower(), status.upper()),
                    auto_approve_at=auto.astimezone(UTC) if isinstance(auto, datetime) else None,
                )
            )
        return out

    def status(self) -> tuple[Report, list[Submission]]:
        """Reconcile, then give the screened-out qualification to workers screened out here."""
        report, subs = super().status()
        row = self.listing_row()
        qual = row.extra.get("qualification_type_id")
        if qual:
            done = set(row.extra.get("blocked", []))
            workers = db.session.scalars(
                select(PlatformIdentity.external_id)
                .join(Participant, Participant.id == PlatformIdentity.participant_id)
                .where(
                    Participant.study_id == self.study.id,
                    Participant.platform == Platform.mturk,
                    Participant.status == ParticipantStatus.screened_out,
                    # A test participant's ID is no worker's: MTurk refuses it (and would
                    # refuse every later status, approve and bonus with it).
                    Participant.is_test.is_(False),
                )
            )
            found = {canonical_spelling(Platform.mturk, w) for w in workers} - done
            # MTurk refuses a malformed ID (and would refuse the whole call): skipped, named.
            new = sorted(w for w in found if mturk_id("WorkerId", w))
            report.lines += [
                f"not kept out: worker ID {safe_text(repr(w), 80)} is not an MTurk worker ID"
                for w in sorted(found - set(new))
            ]
            for worker in new:
                self.call(
                    "associate_qualification_with_worker",
                    ids={"qualification_type": qual},
                    QualificationTypeId=qual,
                    WorkerId=worker,
                    IntegerValue=1,
                    SendNotification=False,
                )
                done.add(worker)
                row.extra = {**row.extra, "blocked": sorted(done)}
                db.session.commit()
            if new:
                report.lines.append(f"kept {len(new)} screened-out worker(s) out of the HIT")
        return report, subs

    def _review(self, operation: str, assignment: str, feedback: str, reached: str) -> None:
        """Approve or reject one assignment. MTurk refuses to review an assignment twice, so
        a refusal after a lost answer is checked: already ``reached`` is done, not an error."""
        try:
            self.call(
                operation,
                ids={"assignment": assignment},
                AssignmentId=assignment,
                RequesterFeedback=feedback,
            )
        except Refused:
            if self._assignment_status(assignment) != reached:
                raise

    def _approve(self, subs: list[Submission]) -> None:
        for sub in subs:
            self._review(
                "approve_assignment", sub.submission_id, "Thank you for taking part.", "APPROVED"
            )

    def _reject(self, sub: Submission, reason: str, category: str) -> None:
        self._review("reject_assignment", sub.submission_id, reason[:1024], "REJECTED")

    # -- bonuses ----------------------------------------------------------------------------
    def _already_paid(self, b: BonusPayment, assignment: str) -> bool:
        """Whether MTurk lists a bonus of this row's amount on the assignment that no other
        row of the ledger recorded as paid accounts for (every page of ListBonusPayments)."""
        listed: list[float] = []
        for p in self._pages(
            "list_bonus_payments",
            "BonusPayments",
            ids={"assignment": assignment},
            AssignmentId=assignment,
        ):
            try:  # read as written: a sub-cent amount matches no ledger row by rounding
                cents = Decimal(str(p.get("BonusAmount", ""))) * 100
            except InvalidOperation:
                cents = Decimal("NaN")
            if not cents.is_finite() or cents != cents.to_integral_value():
                raise RecruitError(
                    f"MTurk lists a bonus of {safe_text(repr(p.get('BonusAmount')), 40)} on "
                    f"{assignment}, not an amount in whole cents; nothing was changed"
                )
            listed.append(float(cents))
        others = [
            o.amount_cents
            for o in db.session.scalars(
                select(BonusPayment).where(
                    BonusPayment.participant_id == b.participant_id,
                    BonusPayment.platform == Platform.mturk,
                    BonusPayment.platform_state == ledger.PAID,
                    BonusPayment.id != b.id,
                )
            )
        ]
        pid = b.participant_id
        return bool(ledger.matched_amounts([b], {pid: listed}, {pid: others}))

    def _assignment_status(self, assignment: str) -> str | None:
        """The assignment's status on MTurk now, in Prolific's words (``GetAssignment``); an
        assignment of a HIT other than the study's is not this study's to pay."""
        resp = self.call("get_assignment", ids={"assignment": assignment}, AssignmentId=assignment)
        found = resp.get("Assignment") or {}
        status, hit = found.get("AssignmentStatus"), self.listing_row().extra.get("hit_id")
        if not isinstance(status, str):
            raise RecruitError(f"MTurk's answer for assignment {assignment} has no status")
        if hit and found.get("HITId") != hit:
            return f"of HIT {safe_text(str(found.get('HITId')), 64)}, not this study's HIT {hit},"
        return MTURK_STATUS.get(status.lower(), status.upper())

    def _pay(
        self,
        rows: list[tuple[BonusPayment, PlatformIdentity]],
        report: Report,
        claim: ledger.Claim,
        allowed: set[int],
    ) -> None:
        db.session.expire_all()
        for b, ident in rows:
            state = b.platform_state
            sends = state in (ledger.NEW, ledger.PAYING) and b.id in allowed
            if not sends and state != ledger.FILED:
                continue
            assignment = ident.external_session_id
            code = ident.participant.code
            if not assignment:
                report.lines.append(f"bonus of {code}: no assignment recorded; not sent")
                continue
            if not (
                mturk_id("AssignmentId", assignment) and mturk_id("WorkerId", ident.external_id)
            ):
                report.lines.append(
                    f"bonus of {code}: its worker or assignment ID is not one MTurk takes; not sent"
                )
                continue
            if not claim.take([b.id], (state,)):
                report.lines.append(f"bonus of {code}: being paid by another run")
                continue
            try:
                if self._already_paid(b, assignment):  # whatever the state: MTurk's record
                    claim.move([b.id], state, ledger.PAID, keep=False, paid_at=ledger.clock())
                elif sends:
                    self._pay_row(claim, b, state, ident, assignment, report)
                else:
                    claim.release([b.id], state)  # sent by file: MTurk does not list it yet
            except ledger.ClaimLost:
                raise
            except RecruitError as exc:  # a read before sending failed: nothing was sent
                claim.release([b.id], state)
                report.lines.append(f"bonus of {code}: {exc}")

    def _pay_row(
        self,
        claim: ledger.Claim,
        b: BonusPayment,
        state: str | None,
        ident: PlatformIdentity,
        assignment: str,
        report: Report,
    ) -> None:
        code = ident.participant.code
        status = self._assignment_status(assignment)  # immediately before paying
        if not payable(status):
            claim.move([b.id], state, ledger.NEW, keep=False)
            report.lines.append(f"not paid: {code}: {status} on MTurk just before paying")
            report.counts["withheld"] = report.counts.get("withheld", 0) + 1
            return
        claim.move(
            [b.id],
            state,
            ledger.PAYING,
            platform_payment_id=b.request_token,
            sent_at=ledger.clock(),
        )
        try:
            self.call(
                "send_bonus",
                ids={"assignment": assignment, "token": b.request_token},
                WorkerId=canonical_spelling(Platform.mturk, ident.external_id),
                BonusAmount=_dollars(b.amount_cents),
                AssignmentId=assignment,
                Reason=b.reason,
                UniqueRequestToken=b.request_token,
            )
        except NotSent as exc:
            claim.move([b.id], ledger.PAYING, ledger.NEW, keep=False)
            report.lines.append(f"bonus of {code}: {exc}")
            return
        except Refused as exc:
            # MTurk refuses a repeat of a token it has paid: look the bonus up before judging.
            if not self._already_paid(b, assignment):
                claim.move(
                    [b.id],
                    ledger.PAYING,
                    ledger.NEW,
                    keep=False,
                    platform_note=ledger.note(f"MTurk refused SendBonus: {exc.reason}"),
                )
                report.lines.append(f"bonus of {code}: {exc}; the next run tries again")
                return
        except OutcomeUnknown as exc:
            claim.move([b.id], ledger.PAYING, ledger.PAYING, keep=False)
            report.lines.append(f"bonus of {code}: {exc}")
            return
        claim.move([b.id], ledger.PAYING, ledger.PAID, keep=False, paid_at=ledger.clock())

    def _settle(
        self,
        rows: list[tuple[BonusPayment, PlatformIdentity]],
        report: Report,
        claim: ledger.Claim,
        *,
        retry_refused: bool,
        release: frozenset[str],
    ) -> None:
        """Sends with an unknown outcome: paid if MTurk lists the bonus (its listing is
        synchronous), else new again (the next run sends it with the same token). Rows sent
        by file: paid once MTurk lists them, else left as they are."""
        if release:
            report.lines.append(
                "MTurk lists its bonuses at once: settle decides from that list, --release is "
                "not needed"
            )
        db.session.expire_all()
        for b, ident in rows:
            state, code = b.platform_state, ident.participant.code
            if state == ledger.REFUSED and retry_refused:
                claim.move(claim.take([b.id], (state,)), state, ledger.NEW, keep=False)
                report.lines.append(f"{code}: refused bonus is new again; `bonus` sends it")
            if state not in (ledger.PAYING, ledger.FILED) or not ident.external_session_id:
                continue
            held = claim.take([b.id], (state,))
            if not held:
                continue
            if self._already_paid(b, ident.external_session_id):
                claim.move(held, state, ledger.PAID, keep=False, paid_at=ledger.clock())
                report.lines.append(f"settled {code}: MTurk lists the bonus; recorded as paid")
            elif state == ledger.FILED:
                claim.release(held, state)
            else:
                claim.move(held, state, ledger.NEW, keep=False)
                report.lines.append(f"settled {code}: MTurk has no such bonus; `bonus` sends it")
