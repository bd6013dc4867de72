"""MTurk through boto3 (the AWS SDK: credentials from its usual chain — environment,
``~/.aws/credentials``, an instance role — never from FrameLab).

The sandbox is the default; the live marketplace only with ``production=True`` (the CLI's
``--production``); ``MTURK_ENDPOINT_URL`` overrides the endpoint. A listing made in one is
never driven from the other.

- ``create``: ``CreateHITType`` (reward, title, qualification requirements) — nothing is
  posted yet — and, with ``block_screened_out``, a qualification type that workers screened
  out here receive, so the HIT does not let them in again;
- ``publish``: ``CreateHITWithHITType`` with the study's ExternalQuestion and a
  ``UniqueRequestToken`` (a retried call cannot post two HITs); publishing a paused HIT
  extends it again;
- ``pause`` and ``close``: ``UpdateExpirationForHIT`` to a past time (expires it now);
- ``status``: ``ListAssignmentsForHIT`` (reconciled into platform statuses);
- ``approve``/``reject``: ``ApproveAssignment``/``RejectAssignment`` (with feedback);
- ``bonus``: ``SendBonus`` with the ledger row's ``UniqueRequestToken``. A row whose earlier
  send has an unknown outcome is first looked up with ``ListBonusPayments`` and sent again
  (same token) only if MTurk has no such bonus.
"""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime, timedelta
from typing import Any

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
from webapp.recruit.base import Cost, Recruiter, RecruitError, Report, Submission, fee
from webapp.recruit.settings import MTURK_MASTERS, MTURK_SYSTEM_QUALIFICATIONS
from webapp.services.entry import canonical_spelling
from webapp.services.reconcile import MTURK_STATUS

SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
_THROTTLED = {"Throttling", "ThrottlingException", "TooManyRequestsException"}
_PAST = datetime(2015, 1, 1, tzinfo=UTC)  # UpdateExpirationForHIT: a past time expires now
AUTO_APPROVE_SECONDS = 7 * 24 * 3600  # MTurk approves unreviewed work after this


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
        """Call one MTurk operation; retry throttling and 5xx (every call here is idempotent:
        reads, tokens, or transitions MTurk refuses to repeat); audit every attempt."""
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        endpoint = f"{self.endpoint}/{operation}"
        for attempt in range(1, 6):
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
                if (code in _THROTTLED or status >= 500 or code == "ServiceFault") and attempt < 5:
                    self.backoff(attempt)
                    continue
                raise RecruitError(
                    f"MTurk refused {operation}: {code}: {str(err.get('Message', ''))[:300]}"
                ) from None
            except BotoCoreError as exc:
                self.log_call(
                    "POST", endpoint, f"error: {type(exc).__name__}", ids=ids, attempt=attempt
                )
                if attempt < 5:
                    self.backoff(attempt)
                    continue
                raise RecruitError(
                    f"MTurk did not answer {operation} ({type(exc).__name__})"
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

    def _create(self, row: Recruitment) -> tuple[str, str]:
        s, d = self.settings, self.study.definition
        qual_id = None
        if s.block_screened_out:
            resp = self.call(
                "create_qualification_type",
                Name=f"FrameLab {self.study.slug} screened out ({row.id})",
                Description=(
                    f"Workers who were screened out of the FrameLab study {self.study.slug}; "
                    "its HIT is not shown to them again"
                ),
                QualificationTypeStatus="Active",
            )
            qual_id = resp["QualificationType"]["QualificationTypeId"]
        resp = self.call(
            "create_hit_type",
            AutoApprovalDelayInSeconds=AUTO_APPROVE_SECONDS,
            AssignmentDurationInSeconds=s.assignment_minutes * 60,
            Reward=_dollars(s.reward_cents),
            Title=self.study.title,
            Keywords=s.keywords,
            Description=(d["description"] or self.study.title)[:2000],
            QualificationRequirements=self.requirements(qual_id),
        )
        hit_type = resp["HITTypeId"]
        row.extra = {
            "hit_type_id": hit_type,
            **({"qualification_type_id": qual_id} if qual_id else {}),
        }
        return hit_type, "HIT TYPE CREATED"

    def _transition(self, external_id: str, action: str) -> str:
        from webapp.services.mturk import external_question_xml

        row = self._listing()
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
            base = row.external_url.rsplit("/s/", 1)[0]
            token = hashlib.sha256(f"{self.study.slug}:hit:{row.id}".encode()).hexdigest()[:32]
            resp = self.call(
                "create_hit_with_hit_type",
                ids={"hit_type": row.extra["hit_type_id"]},
                HITTypeId=row.extra["hit_type_id"],
                MaxAssignments=self.settings.places,
                LifetimeInSeconds=int(self.settings.lifetime_hours * 3600),
                Question=external_question_xml(self.study, base),
                RequesterAnnotation=f"framelab:{self.study.slug}"[:255],
                UniqueRequestToken=f"framelab-hit-{token}",
            )
            hit = resp["HIT"]
            row.extra = {**row.extra, "hit_id": hit["HITId"]}
            row.external_id = hit["HITId"]
            return str(hit.get("HITStatus") or "Assignable")
        hit_id = row.extra.get("hit_id")
        if not hit_id:
            raise RecruitError("the HIT is not published yet; nothing to pause or close")
        self.call("update_expiration_for_hit", ids={"hit": hit_id}, HITId=hit_id, ExpireAt=_PAST)
        return "PAUSED" if action == "pause" else "CLOSED"

    def _submissions(self, external_id: str) -> list[Submission]:
        row = self._listing()
        self._guard(row)
        hit_id = row.extra.get("hit_id")
        if not hit_id:
            return []
        out: list[Submission] = []
        token = None
        for _ in range(10_000):
            params: dict[str, Any] = {"HITId": hit_id, "MaxResults": 100}
            if token:
                params["NextToken"] = token
            resp = self.call("list_assignments_for_hit", ids={"hit": hit_id}, **params)
            for a in resp.get("Assignments", []):
                out.append(
                    Submission(
                        submission_id=a["AssignmentId"],
                        worker_id=canonical_spelling(Platform.mturk, a["WorkerId"]),
                        status=MTURK_STATUS.get(
                            str(a.get("AssignmentStatus", "")).lower(),
                            str(a.get("AssignmentStatus", "")).upper(),
                        ),
                    )
                )
            token = resp.get("NextToken")
            if not token:
                break
        return out

    def status(self) -> tuple[Report, list[Submission]]:
        """Reconcile, then give the screened-out qualification to workers screened out here."""
        report, subs = super().status()
        row = self._listing()
        qual = row.extra.get("qualification_type_id")
        if qual:
            from sqlalchemy import select

            done = set(row.extra.get("blocked", []))
            workers = db.session.scalars(
                select(PlatformIdentity.external_id)
                .join(Participant, Participant.id == PlatformIdentity.participant_id)
                .where(
                    Participant.study_id == self.study.id,
                    Participant.platform == Platform.mturk,
                    Participant.status == ParticipantStatus.screened_out,
                )
            )
            new = sorted({canonical_spelling(Platform.mturk, w) for w in workers} - done)
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

    def _approve(self, subs: list[Submission]) -> None:
        for sub in subs:
            self.call(
                "approve_assignment",
                ids={"assignment": sub.submission_id},
                AssignmentId=sub.submission_id,
                RequesterFeedback="Thank you for taking part.",
            )

    def _reject(self, sub: Submission, reason: str, category: str) -> None:
        self.call(
            "reject_assignment",
            ids={"assignment": sub.submission_id},
            AssignmentId=sub.submission_id,
            RequesterFeedback=reason[:1024],
        )

    # -- bonuses ----------------------------------------------------------------------------
    def _already_paid(self, b: BonusPayment, assignment: str) -> bool:
        resp = self.call(
            "list_bonus_payments", ids={"assignment": assignment}, AssignmentId=assignment
        )
        return any(
            round(float(p.get("BonusAmount", 0)) * 100) == b.amount_cents
            for p in resp.get("BonusPayments", [])
        )

    def _pay(self, rows: list[tuple[BonusPayment, PlatformIdentity]], report: Report) -> None:
        for b, ident in rows:
            assignment = ident.external_session_id
            if not assignment:
                report.lines.append(
                    f"bonus {b.request_token}: no assignment recorded for this worker; not sent"
                )
                continue
            if b.platform_state == "paying" and self._already_paid(b, assignment):
                b.platform_state, b.paid_at = "paid", utcnow()
                db.session.commit()
                continue
            b.platform_payment_id, b.platform_state = b.request_token, "paying"
            db.session.commit()
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
            except RecruitError as exc:
                if "UniqueRequestToken" not in str(exc):  # a repeat of a paid token is paid
                    report.lines.append(f"bonus {b.request_token}: {exc}")
                    continue
            b.platform_state, b.paid_at = "paid", utcnow()
            db.session.commit()
