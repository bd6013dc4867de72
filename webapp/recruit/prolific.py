"""Prolific through its public REST API (https://docs.prolific.com/api-reference).

The token comes from ``PROLIFIC_TOKEN`` and goes only into the ``Authorization`` header: it is
never logged, stored or exported. ``PROLIFIC_API_URL`` overrides the base URL (tests run a
loopback fake). Endpoints used:

- ``POST /api/v1/studies/`` creates a draft whose ``external_study_url`` carries
  ``{{%PROLIFIC_PID%}}``, ``{{%STUDY_ID%}}`` and ``{{%SESSION_ID%}}`` and whose completion
  codes are the study's own: ``completed`` (manually reviewed: FrameLab approves those who
  completed here), ``screened_out`` and ``study_full`` (both ask the participant to return);
- ``POST /api/v1/studies/{id}/transition/`` with ``PUBLISH``, ``PAUSE``, ``START``, ``STOP``;
- ``GET /api/v1/studies/{id}/submissions/`` (paginated through ``_links.next``);
- ``POST /api/v1/submissions/bulk-approve/`` with ``submission_ids``;
- ``POST /api/v1/submissions/{id}/transition/`` with ``REJECT``, a message and a category;
- ``POST /api/v1/submissions/bonus-payments/`` sets up bonuses (returns an id), and
  ``POST /api/v1/bulk-bonus-payments/{id}/pay/`` pays them. Prolific documents the pay call as
  *not idempotent*, so it is sent once per set-up: the ledger row is marked ``paying`` before
  the call, and a call whose outcome is unknown (a 5xx, a dropped connection) leaves it there
  to be checked by hand, never re-sent.
"""

from __future__ import annotations

import os
import time
from typing import Any
from urllib.parse import urlsplit

from webapp.extensions import db
from webapp.models import BonusPayment, Platform, PlatformIdentity, Recruitment, utcnow
from webapp.recruit.base import Cost, Recruiter, RecruitError, Report, Submission, fee
from webapp.services.entry import canonical_spelling

DEFAULT_API_URL = "https://api.prolific.com"
# Prolific's rejection categories (POST /api/v1/submissions/{id}/transition/).
REJECTION_CATEGORIES = (
    "TOO_QUICKLY",
    "TOO_SLOWLY",
    "FAILED_INSTRUCTIONS",
    "INCOMP_LONGITUDINAL",
    "FAILED_CHECK",
    "LOW_EFFORT",
    "MALINGERING",
    "NO_CODE",
    "BAD_CODE",
    "NO_DATA",
    "UNSUPP_DEVICE",
    "OTHER",
)
MIN_REJECT_MESSAGE = 100  # Prolific refuses shorter rejection messages
APPROVE_BATCH = 500
# A run that claimed ledger rows and died before Prolific answered its set-up (which pays
# nothing by itself) leaves them claimed; after this many seconds another run may take them.
CLAIM_EXPIRES = 3600
_TRANSITIONS = {"publish": "PUBLISH", "pause": "PAUSE", "resume": "START", "close": "STOP"}
_RETURN_REASON = "You were not able to complete this study; please return your submission."


def _claim_mark(seconds: float, suffix: str = "") -> str:
    """``claim:<10-digit epoch seconds>:<suffix>``: claims sort by when they were made."""
    return f"claim:{int(seconds):010d}:{suffix}"


def _error_text(resp: Any) -> str:
    """The reason in a Prolific error body (``{"error": {"title", "detail"}}``), shortened."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200]
    err = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(err, dict):
        parts = [str(err.get("title") or ""), str(err.get("detail") or "")]
        return "; ".join(p for p in parts if p)[:300] or str(err)[:300]
    return str(err)[:300]


class ProlificRecruiter(Recruiter):
    """A study on Prolific (see the module docstring for the calls)."""

    platform = Platform.prolific
    label = "Prolific"
    unconfirmed_note = (
        "check the study's bonus payments on Prolific; FrameLab never sends it again "
        "(Prolific's pay call is not idempotent)"
    )

    def __init__(self, *args: Any, client: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client = client

    # -- HTTP -----------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """An httpx client with the token header (made on first use)."""
        if self._client is None:
            import httpx

            token = os.environ.get("PROLIFIC_TOKEN", "").strip()
            if not token:
                raise RecruitError(
                    "set PROLIFIC_TOKEN to an API token of your Prolific account "
                    "(Settings > API tokens); it is read from the environment only"
                )
            base = os.environ.get("PROLIFIC_API_URL", DEFAULT_API_URL).rstrip("/")
            self._client = httpx.Client(
                base_url=base,
                headers={"Authorization": f"Token {token}", "Accept": "application/json"},
                timeout=30.0,
                follow_redirects=False,
            )
        return self._client

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        ids: dict[str, Any] | None = None,
        idempotent: bool,
    ) -> Any:
        """Send one request; retry 429 always and 5xx/network errors only when ``idempotent``.

        Every attempt is an audit event. Returns the decoded JSON (or text) of a 2xx answer.

        Raises
        ------
        RecruitError
            A 4xx answer (with Prolific's reason), retries exhausted, or an unknown outcome.
        """
        import httpx

        for attempt in range(1, 6):
            self.release()
            try:
                resp = self.client.request(method, path, json=json)
            except httpx.TransportError as exc:
                self.log_call(
                    method, path, f"error: {type(exc).__name__}", ids=ids, attempt=attempt
                )
                if idempotent and attempt < 5:
                    self.backoff(attempt)
                    continue
                raise RecruitError(
                    f"Prolific did not answer {method} {path} ({type(exc).__name__})"
                    + ("" if idempotent else "; its outcome is unknown, check Prolific")
                ) from None
            self.log_call(method, path, resp.status_code, ids=ids, attempt=attempt)
            retry = resp.status_code == 429 or (idempotent and resp.status_code >= 500)
            if retry and attempt < 5:
                after = resp.headers.get("Retry-After")
                self.backoff(attempt, float(after) if after and after.isdigit() else None)
                continue
            if resp.status_code == 429:
                raise RecruitError(
                    f"Prolific refused {method} {path} 5 times as too many requests (429); "
                    "nothing was done by the last attempt; run the command again later"
                )
            if resp.status_code >= 500:
                raise RecruitError(
                    f"Prolific failed {method} {path} with {resp.status_code}"
                    + ("" if idempotent else "; its outcome is unknown, check Prolific")
                )
            if resp.status_code >= 400:
                raise RecruitError(
                    f"Prolific refused {method} {path} ({resp.status_code}): {_error_text(resp)}"
                )
            if not resp.content:
                return None
            try:
                return resp.json()
            except ValueError:
                return resp.text
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the listing ------------------------------------------------------------------------
    def cost(self, bonuses_cents: int) -> Cost:
        """Rewards × places, Prolific's fee on rewards and bonuses, and the bonuses."""
        s = self.settings
        rewards = s.reward_cents * s.places
        return Cost(
            rewards=rewards,
            reward_fees=fee(rewards, s.fee_rate),
            bonuses=bonuses_cents,
            bonus_fees=fee(bonuses_cents, s.fee_rate),
            fee_rate=s.fee_rate,
            note="fee_rate is the recruiter block's; Prolific's invoice has your account's rate "
            "(and VAT where it applies)",
        )

    def study_url(self, base_url: str) -> str:
        """The study link with Prolific's placeholders (https, or http on this machine)."""
        parts = urlsplit(base_url.strip())
        local = parts.hostname in {"127.0.0.1", "localhost", "::1"}
        if not parts.netloc or parts.scheme not in ({"https", "http"} if local else {"https"}):
            raise RecruitError(
                f"--url must be the platform's public https:// address: {base_url!r}"
            )
        root = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        return (
            f"{root}/s/{self.study.slug}?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
            "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
        )

    def create_body(self, url: str) -> dict[str, Any]:
        """The body of ``POST /api/v1/studies/`` (a draft)."""
        d, s = self.study.definition, self.settings
        codes = d["recruitment"]["completion_codes"]
        completion = [
            {
                "code": codes["completed"],
                "code_type": "COMPLETED",
                "actions": [{"action": "MANUALLY_REVIEW"}],
            },
            {
                "code": codes["screened_out"],
                "code_type": "FAILED_ATTENTION_CHECK",
                "actions": [{"action": "REQUEST_RETURN", "return_reason": _RETURN_REASON}],
            },
        ]
        if "study_full" in codes:
            completion.append(
                {
                    "code": codes["study_full"],
                    "code_type": "OTHER",
                    "actions": [{"action": "REQUEST_RETURN", "return_reason": _RETURN_REASON}],
                }
            )
        body: dict[str, Any] = {
            "name": self.study.title,
            "internal_name": f"framelab:{self.study.slug}",
            "description": d["description"] or self.study.title,
            "external_study_url": url,
            "prolific_id_option": "url_parameters",
            "completion_codes": completion,
            "total_available_places": s.places,
            "estimated_completion_time": s.estimated_minutes,
            "reward": s.reward_cents,
            "device_compatibility": list(s.devices),
        }
        if s.eligibility:
            body["filters"] = [dict(f) for f in s.eligibility]
        return body

    def _create(self, row: Recruitment) -> tuple[str, str]:
        data = self.call(
            "POST", "/api/v1/studies/", json=self.create_body(row.external_url), idempotent=False
        )
        if not isinstance(data, dict) or not data.get("id"):
            raise RecruitError(f"Prolific's answer to create has no study id: {str(data)[:200]}")
        return str(data["id"]), str(data.get("status") or "UNPUBLISHED")

    def _transition(self, external_id: str, action: str) -> str:
        row = self.row()
        if action == "publish" and row is not None and row.status == "PAUSED":
            action = "resume"  # publishing a paused study starts it again
        data = self.call(
            "POST",
            f"/api/v1/studies/{external_id}/transition/",
            json={"action": _TRANSITIONS[action]},
            ids={"study": external_id},
            idempotent=True,  # a repeated transition is refused, never doubled
        )
        return str((data or {}).get("status") or action.upper())

    def _submissions(self, external_id: str) -> list[Submission]:
        path: str | None = f"/api/v1/studies/{external_id}/submissions/"
        out: list[Submission] = []
        for _ in range(10_000):  # pages; a bound instead of trusting the next links forever
            if path is None:
                break
            data = self.call("GET", path, ids={"study": external_id}, idempotent=True)
            for item in (data or {}).get("results", []):
                pid = str(item.get("participant_id") or item.get("participant") or "")
                if not pid:
                    continue
                out.append(
                    Submission(
                        submission_id=str(item["id"]),
                        worker_id=canonical_spelling(Platform.prolific, pid),
                        status=str(item.get("status", "")).upper(),
                        code=item.get("study_code") or item.get("entered_code"),
                    )
                )
            nxt = ((data or {}).get("_links") or {}).get("next") or {}
            href = nxt.get("href") if isinstance(nxt, dict) else nxt
            if href:
                parts = urlsplit(href)
                path = parts.path + (f"?{parts.query}" if parts.query else "")
            else:
                path = None
        return out

    def _approve(self, subs: list[Submission]) -> None:
        ids = [s.submission_id for s in subs]
        for i in range(0, len(ids), APPROVE_BATCH):
            batch = ids[i : i + APPROVE_BATCH]
            self.call(
                "POST",
                "/api/v1/submissions/bulk-approve/",
                json={"submission_ids": batch},
                ids={"submissions": len(batch)},
                idempotent=True,  # approving an approved submission changes nothing
            )

    def _reject(self, sub: Submission, reason: str, category: str) -> None:
        if category not in REJECTION_CATEGORIES:
            raise RecruitError(f"category {category!r} is not one of {list(REJECTION_CATEGORIES)}")
        if len(reason) < MIN_REJECT_MESSAGE:
            raise RecruitError(
                f"Prolific needs a rejection message of at least {MIN_REJECT_MESSAGE} characters "
                f"(this one has {len(reason)}); say what was wrong"
            )
        self.call(
            "POST",
            f"/api/v1/submissions/{sub.submission_id}/transition/",
            json={"action": "REJECT", "message": reason, "rejection_category": category},
            ids={"submission": sub.submission_id},
            idempotent=True,  # Prolific documents the transition as idempotent
        )

    # -- bonuses ----------------------------------------------------------------------------
    def _claim(self, ids: list[int], *, state: str | None, to: str, mark: str | None) -> int:
        """Move ledger rows from ``state`` to ``to`` in one conditional UPDATE; commit.

        Two runs of ``bonus`` at once both see the same unpaid rows; only the run whose UPDATE
        changes a row may send it (the database decides, on SQLite and PostgreSQL alike).
        """
        from sqlalchemy import and_, or_, update

        if state is None:  # unclaimed, or claimed by a run that died before Prolific answered
            cond = or_(
                BonusPayment.platform_state.is_(None),
                and_(
                    BonusPayment.platform_state == "claimed",
                    BonusPayment.platform_payment_id < _claim_mark(time.time() - CLAIM_EXPIRES),
                ),
            )
        else:
            cond = BonusPayment.platform_state == state
        values: dict[str, Any] = {"platform_state": to}
        if mark is not None:
            values["platform_payment_id"] = mark
        result = db.session.execute(
            update(BonusPayment)
            .where(BonusPayment.id.in_(ids), cond)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        db.session.commit()
        return int(result.rowcount or 0)

    def _pay(self, rows: list[tuple[BonusPayment, PlatformIdentity]], report: Report) -> None:
        import secrets

        listing = self._listing()
        took_part = {s.worker_id for s in self.last_submissions}
        fresh = []
        stale = _claim_mark(time.time() - CLAIM_EXPIRES)
        for b, i in rows:
            abandoned = b.platform_state == "claimed" and (b.platform_payment_id or "") < stale
            if b.platform_state is not None and not abandoned:
                continue
            if canonical_spelling(Platform.prolific, i.external_id) not in took_part:
                # Prolific refuses the whole set-up if one person did not take part in it.
                report.lines.append(
                    f"not paid here: {b.request_token}: not a participant of Prolific study "
                    f"{listing.external_id} (pay with `framelab bonus --platform prolific`)"
                )
                continue
            fresh.append((b, i))
        claim = _claim_mark(time.time(), secrets.token_hex(8))
        if fresh and self._claim([b.id for b, _ in fresh], state=None, to="claimed", mark=claim):
            db.session.expire_all()
            mine = [(b, i) for b, i in fresh if b.platform_payment_id == claim]
            csv_bonuses = "\n".join(
                f"{canonical_spelling(Platform.prolific, i.external_id)},"
                f"{b.amount_cents // 100}.{b.amount_cents % 100:02d}"
                for b, i in mine
            )
            try:
                data = self.call(
                    "POST",
                    "/api/v1/submissions/bonus-payments/",
                    json={"study_id": listing.external_id, "csv_bonuses": csv_bonuses},
                    ids={"study": listing.external_id, "bonuses": len(mine)},
                    idempotent=False,
                )
                bulk_id = str((data or {}).get("id") or "")
                if not bulk_id:
                    raise RecruitError(
                        f"Prolific's bonus set-up answer has no id: {str(data)[:200]}"
                    )
            except RecruitError:
                # A set-up pays nothing: release the rows so the next run sets them up again.
                for b, _ in mine:
                    b.platform_payment_id, b.platform_state = None, None
                db.session.commit()
                raise
            for b, _ in mine:
                b.platform_payment_id, b.platform_state = bulk_id, "set_up"
            db.session.commit()
            report.lines.append(f"set up bonus payment {bulk_id} ({len(mine)} bonuses)")
        # Pay each set-up once: mark it paying first (conditionally, so only one run sends it);
        # an unknown outcome stays "paying" and is never re-sent.
        for b, _ in rows:
            db.session.refresh(b)
        bulk_ids = list(
            dict.fromkeys(b.platform_payment_id for b, _ in rows if b.platform_state == "set_up")
        )
        for bulk_id in bulk_ids:
            group = [b for b, _ in rows if b.platform_payment_id == bulk_id]
            if not self._claim([b.id for b in group], state="set_up", to="paying", mark=None):
                continue  # another run is paying it
            try:
                self.call(
                    "POST",
                    f"/api/v1/bulk-bonus-payments/{bulk_id}/pay/",
                    ids={"bulk_bonus_payment": bulk_id},
                    idempotent=False,
                )
            except RecruitError as exc:
                if "outcome is unknown" not in str(exc):  # refused: nothing was paid
                    self._claim([b.id for b in group], state="paying", to="set_up", mark=None)
                report.lines.append(f"payment {bulk_id}: {exc}")
                continue
            now = utcnow()
            for b in group:
                db.session.refresh(b)
                b.platform_state, b.paid_at = "paid", now
            db.session.commit()
        stuck = [b for b, _ in rows if b.platform_state == "claimed"]
        if stuck:
            report.lines.append(
                f"{len(stuck)} bonus(es) are being set up by another run (or by one that was "
                "interrupted: nothing is paid by a set-up alone; a run an hour later takes them)"
            )
