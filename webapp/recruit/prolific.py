"""Prolific through its public REST API (https://docs.prolific.com/api-reference).

The token comes from ``PROLIFIC_TOKEN`` and goes only into the ``Authorization`` header: it is
never logged, stored or exported. ``PROLIFIC_API_URL`` overrides the base URL (tests run a
loopback fake). Endpoints used:

- ``POST /api/v1/studies/`` creates a draft whose ``external_study_url`` carries
  ``{{%PROLIFIC_PID%}}``, ``{{%STUDY_ID%}}`` and ``{{%SESSION_ID%}}`` and whose completion
  codes are the study's own: ``completed`` (manually reviewed: FrameLab approves those who
  completed here), ``screened_out`` and ``study_full`` (both ask the participant to return).
  Its ``internal_name`` carries the listing row's reference, so ``GET /api/v1/studies/``
  finds a draft whose create answer was lost;
- ``GET /api/v1/studies/{id}/`` (the status: ``PUBLISHING`` turns ``ACTIVE`` by itself) and
  ``POST /api/v1/studies/{id}/transition/`` with ``PUBLISH``, ``PAUSE``, ``START``, ``STOP``;
- ``GET /api/v1/studies/{id}/submissions/`` (paginated through ``_links.next``) and
  ``GET /api/v1/submissions/{id}/`` (its ``bonus_payments``, in cents, confirm a payment);
- ``POST /api/v1/submissions/bulk-approve/`` with ``submission_ids``;
- ``POST /api/v1/submissions/{id}/transition/`` with ``REJECT``, a message and a category;
- ``POST /api/v1/submissions/bonus-payments/`` sets up bonuses (returns an id), and
  ``POST /api/v1/bulk-bonus-payments/{id}/pay/`` pays them, asynchronously and *not
  idempotently* (:mod:`webapp.recruit.prolific_pay` sends it once per set-up).

Every answer is checked at this boundary: a missing id or status is a clear
:class:`~webapp.recruit.base.RecruitError`, never a crash further on.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from webapp.definition_cache import study_definition
from webapp.extensions import db
from webapp.models import BonusPayment, Platform, PlatformIdentity, Recruitment
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
from webapp.recruit.prolific_answers import answer_dict, prolific_id
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
_TRANSITIONS = {"publish": "PUBLISH", "pause": "PAUSE", "resume": "START", "close": "STOP"}
_RETURN_REASON = "You were not able to complete this study; please return your submission."
# Where a transition leaves a study (a refused repeat is accepted when the study is there).
_REACHED = {
    "publish": {"PUBLISHING", "ACTIVE", "SCHEDULED"},
    "resume": {"PUBLISHING", "ACTIVE"},
    "pause": {"PAUSED"},
    "close": {"AWAITING REVIEW", "COMPLETED"},
}
MAX_PAGES = 10_000


def _error_text(resp: Any) -> str:
    """The reason in a Prolific error body (``{"error": {"title", "detail"}}``), shortened
    and scrubbed for the console (:func:`~webapp.recruit.base.safe_text`)."""
    try:
        body = resp.json()
    except ValueError:
        return safe_text(resp.text)
    err = body.get("error", body) if isinstance(body, dict) else body
    if not isinstance(err, dict):
        return safe_text(err)
    detail = err.get("detail")
    if isinstance(detail, dict):  # field -> messages
        detail = "; ".join(
            f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in detail.items()
        )
    elif isinstance(detail, list):
        detail = " ".join(map(str, detail))
    parts = [str(err.get("title") or ""), str(detail or "")]
    return safe_text("; ".join(p for p in parts if p) or err)


class ProlificRecruiter(Recruiter):
    """A study on Prolific (see the module docstring for the calls)."""

    platform = Platform.prolific
    label = "Prolific"
    unconfirmed_note = (
        "FrameLab never sends it again (Prolific's pay call is not idempotent): `settle` "
        "records it once Prolific lists it, or lets it be set up again if Prolific still lists "
        "none 24 hours after the call"
    )
    unsettled_note = "ask Prolific's support with the payment's id; FrameLab never sends it again"

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
        """Send one request; retry 429 always, 5xx and lost answers only when ``idempotent``,
        and a connection that never opened always (the request was not sent).

        Every attempt is an audit event. Returns the decoded JSON (or text) of a 2xx answer.

        Raises
        ------
        NotSent
            No connection could be made: nothing was sent (safe to send again).
        Refused
            A 4xx answer (with Prolific's reason), or 429 five times: nothing was done.
        OutcomeUnknown
            A non-idempotent call sent without an answer, or with a 5xx: it may have been done.
        """
        import httpx

        for attempt in range(1, MAX_ATTEMPTS + 1):
            last = attempt == MAX_ATTEMPTS
            self.release()
            try:
                resp = self.client.request(method, path, json=json)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                self.log_call(
                    method, path, f"not sent: {type(exc).__name__}", ids=ids, attempt=attempt
                )
                if not last:
                    self.backoff(attempt)
                    continue
                raise NotSent(
                    f"Prolific could not be reached for {method} {path} ({type(exc).__name__}); "
                    "nothing was sent; run the command again later"
                ) from None
            except httpx.TransportError as exc:
                self.log_call(
                    method, path, f"error: {type(exc).__name__}", ids=ids, attempt=attempt
                )
                if idempotent and not last:
                    self.backoff(attempt)
                    continue
                raise (OutcomeUnknown if not idempotent else RecruitError)(
                    f"Prolific did not answer {method} {path} ({type(exc).__name__})"
                    + ("" if idempotent else "; its outcome is unknown")
                ) from None
            self.log_call(method, path, resp.status_code, ids=ids, attempt=attempt)
            retry = resp.status_code == 429 or (idempotent and resp.status_code >= 500)
            if retry and not last:
                after = resp.headers.get("Retry-After")
                self.backoff(attempt, float(after) if after and after.isdigit() else None)
                continue
            if resp.status_code == 429:
                raise Refused(
                    f"Prolific refused {method} {path} {MAX_ATTEMPTS} times as too many requests "
                    "(429); nothing was done by the last attempt; run the command again later",
                    status=429,
                )
            if resp.status_code >= 500:
                raise (OutcomeUnknown if not idempotent else RecruitError)(
                    f"Prolific failed {method} {path} with {resp.status_code}"
                    + ("" if idempotent else "; its outcome is unknown")
                )
            if resp.status_code >= 400:
                reason = _error_text(resp)
                raise Refused(
                    f"Prolific refused {method} {path} ({resp.status_code}): {reason}",
                    status=resp.status_code,
                    reason=reason,
                    raw=resp.text,
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
            f"(and VAT where it applies); amounts are in {self.currency}, which must be the "
            "currency of your Prolific workspace",
            currency=self.currency,
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

    def internal_name(self, row: Recruitment) -> str:
        """The draft's ``internal_name``: the slug and the listing row's reference."""
        return f"framelab:{self.study.slug}:{row.extra.get('reference', '')}"

    def create_body(self, url: str, internal_name: str = "") -> dict[str, Any]:
        """The body of ``POST /api/v1/studies/`` (a draft)."""
        d, s = study_definition(self.study), self.settings
        codes = d.recruitment.completion_codes
        completion = [
            {
                "code": codes.completed,
                "code_type": "COMPLETED",
                "actions": [{"action": "MANUALLY_REVIEW"}],
            },
            {
                "code": codes.screened_out,
                "code_type": "FAILED_ATTENTION_CHECK",
                "actions": [{"action": "REQUEST_RETURN", "return_reason": _RETURN_REASON}],
            },
        ]
        if codes.study_full is not None:
            completion.append(
                {
                    "code": codes.study_full,
                    "code_type": "OTHER",
                    "actions": [{"action": "REQUEST_RETURN", "return_reason": _RETURN_REASON}],
                }
            )
        body: dict[str, Any] = {
            "name": self.study.title,
            "internal_name": internal_name or f"framelab:{self.study.slug}",
            "description": d.description or self.study.title,
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

    def _create(self, row: Recruitment, *, retrying: bool) -> tuple[str, str, dict[str, Any]]:
        body = self.create_body(row.external_url, self.internal_name(row))
        data = answer_dict(
            self.call("POST", "/api/v1/studies/", json=body, idempotent=False), "create"
        )
        return prolific_id(data.get("id"), "create"), self._status_of(data), dict(row.extra)

    def _find_listing(self, row: Recruitment) -> tuple[str, str] | None:
        """The draft carrying this row's reference in its ``internal_name``, if Prolific has it."""
        name = self.internal_name(row)
        for item in self._pages("/api/v1/studies/", "the list of studies", ids={}):
            if item.get("internal_name") == name:
                return prolific_id(item.get("id"), "the list of studies"), self._status_of(item)
        return None

    @staticmethod
    def _status_of(data: dict[str, Any], default: str = "UNPUBLISHED") -> str:
        status = data.get("status", default)
        if not isinstance(status, str) or not status or len(status) > 40:
            raise RecruitError(
                f"Prolific's answer has no usable study status (got {safe_text(repr(status), 60)})"
            )
        return status.upper()

    def study_status(self, external_id: str) -> str:
        """The study's status on Prolific now (``GET /api/v1/studies/{id}/``)."""
        data = self.call(
            "GET", f"/api/v1/studies/{external_id}/", ids={"study": external_id}, idempotent=True
        )
        return self._status_of(answer_dict(data, "the study"), "")

    def _transition(self, external_id: str, action: str) -> str:
        row = self.row()
        if action == "publish" and row is not None and row.status == "PAUSED":
            action = "resume"  # publishing a paused study starts it again
        try:
            data = self.call(
                "POST",
                f"/api/v1/studies/{external_id}/transition/",
                json={"action": _TRANSITIONS[action]},
                ids={"study": external_id},
                idempotent=True,  # a repeated transition is refused, never doubled
            )
        except RecruitError:
            # A transition whose first answer was lost is refused when repeated: what counts
            # is where the study is now.
            now = self.study_status(external_id)
            if now in _REACHED[action]:
                return now
            raise
        if isinstance(data, dict) and "status" in data:
            return self._status_of(data)
        return self.study_status(external_id)

    def _settle_listing(self, row: Recruitment, report: Report) -> None:
        """Record the study's status now (``PUBLISHING`` becomes ``ACTIVE`` on its own)."""
        if row.external_id and row.status in ("PUBLISHING", "SCHEDULED"):
            row.status = self.study_status(row.external_id)
            db.session.commit()

    def _pages(self, path: str, what: str, *, ids: dict[str, Any]) -> list[dict[str, Any]]:
        """Every result of a paginated list (``results`` and ``_links.next``), checked."""
        out: list[dict[str, Any]] = []
        nxt: str | None = path
        for page in range(1, MAX_PAGES + 1):  # a bound instead of trusting next links forever
            if nxt is None:
                break
            data = answer_dict(self.call("GET", nxt, ids=ids, idempotent=True), what)
            results = data.get("results", [])
            if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
                raise RecruitError(
                    f"Prolific's {what} (page {page}) has no list of results; nothing was changed"
                )
            out += results
            link = (data.get("_links") or {}).get("next") or {}
            href = link.get("href") if isinstance(link, dict) else link
            if href and isinstance(href, str):
                parts = urlsplit(href)
                nxt = parts.path + (f"?{parts.query}" if parts.query else "")
            else:
                nxt = None
        return out

    def fetch_submissions(self, external_id: str) -> list[Submission]:
        what = "list of submissions"
        out: list[Submission] = []
        items = self._pages(
            f"/api/v1/studies/{external_id}/submissions/", what, ids={"study": external_id}
        )
        for n, item in enumerate(items, start=1):
            pid = item.get("participant_id") or item.get("participant")
            status = item.get("status")
            if not isinstance(pid, str) or not pid.strip():
                continue  # a submission without a participant yet (Prolific reserves places)
            if not isinstance(status, str) or not status:
                raise RecruitError(
                    f"Prolific's {what} has an entry without a status (entry {n}); nothing was "
                    "changed"
                )
            code = item.get("study_code") or item.get("entered_code")
            out.append(
                Submission(
                    submission_id=prolific_id(item.get("id"), f"the {what} (entry {n})"),
                    worker_id=canonical_spelling(Platform.prolific, pid),
                    status=status.upper(),
                    code=code if isinstance(code, str) else None,
                )
            )
        return out

    def bonus_payments(self, submission_id: str) -> list[float]:
        """The bonuses Prolific lists as paid on a submission, in cents."""
        data = answer_dict(
            self.call(
                "GET",
                f"/api/v1/submissions/{submission_id}/",
                ids={"submission": submission_id},
                idempotent=True,
            ),
            "a submission",
        )
        paid = data.get("bonus_payments") or []
        if not isinstance(paid, list) or not all(
            isinstance(a, int | float) and not isinstance(a, bool) for a in paid
        ):
            raise RecruitError(
                f"Prolific's submission {submission_id} lists its bonus payments unreadably "
                f"({safe_text(repr(paid), 60)}); nothing was changed"
            )
        return [float(a) for a in paid]

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
    def _pay(
        self,
        rows: list[tuple[BonusPayment, PlatformIdentity]],
        report: Report,
        claim: ledger.Claim,
        allowed: set[int],
    ) -> None:
        from webapp.recruit.prolific_pay import ProlificPayments

        ProlificPayments(self, claim).pay(rows, report, allowed)

    def _settle(
        self,
        rows: list[tuple[BonusPayment, PlatformIdentity]],
        report: Report,
        claim: ledger.Claim,
        *,
        retry_refused: bool,
        release: frozenset[str],
    ) -> None:
        from webapp.recruit.prolific_pay import ProlificPayments

        ProlificPayments(self, claim).settle(
            rows, report, retry_refused=retry_refused, release=release
        )
