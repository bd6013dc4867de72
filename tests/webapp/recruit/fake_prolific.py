"""A loopback fake of Prolific's public API, for tests (no network).

Built from the published API reference (https://docs.prolific.com/api-reference): the request
bodies it checks and the answers it gives have the documented shapes, and it refuses what
Prolific refuses —

- a draft study from ``POST /api/v1/studies/`` (status ``UNPUBLISHED``), listed by
  ``GET /api/v1/studies/`` with its ``internal_name``;
- study transitions: ``PUBLISH`` answers ``PUBLISHING`` (publishing is processed
  asynchronously; the study is ``ACTIVE`` from the next request on), ``PAUSE``/``START``,
  ``STOP`` → ``AWAITING REVIEW``; a transition the study's status does not allow is a 400
  (so a repeated one is refused, never doubled);
- submissions listed in pages with ``_links.next``; one submission by id with its
  ``bonus_payments`` (cents, only once paid);
- bulk approval by submission ids; submission transitions (a ``REJECT`` needs a category and
  a message of 100 characters or more);
- bonus set-up (``id``, and ``amount``, ``fees``, ``vat``, ``total_amount`` in cents, the
  fee and VAT at :attr:`FakeProlific.fee_rate` and :attr:`FakeProlific.vat_rate`, which tests
  vary as accounts differ) refused with a 400 that names every ID that did not take part, is
  not a Prolific ID (24 hex digits), or that :attr:`FakeProlific.refuse_ids` refuses; payment
  answers 202 and pays *later* (:meth:`FakeProlific.process_payments`, as Prolific pays "in
  the following minutes") and is *not* idempotent: paying one set-up twice pays twice, as
  Prolific warns. A pay call whose total is above the workspace's
  :attr:`FakeProlific.balance` is refused (400, insufficient balance);
- no concurrent bonus requests: a set-up or pay call that arrives while another bonus request
  of the workspace is being handled (:attr:`FakeProlific.bonus_in_flight`; a test sets it for
  one from elsewhere, such as the researcher's browser) is answered 429;
- :meth:`FakeProlific.upload_file` is the researcher pasting a payment file into Prolific's
  bulk bonus page (set up and paid at once).

Errors have Prolific's body ``{"error": {"status", "error_code", "title", "detail"}}``;
:meth:`FakeProlific.inject` makes the next calls to a path answer 429 or 5xx, before or after
doing what they ask (an answer lost on the way back).

Participants are simulated with :meth:`FakeProlific.arrive` (a submission starts and the
study URL is handed out with the placeholders filled, as Prolific does) and
:meth:`FakeProlific.finish` (the code the participant came back with).
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

TOKEN = "test-token-0123456789"
PAGE_SIZE = 3  # small, so the client must follow the next links
CATEGORIES = {
    "TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
    "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER",
}  # fmt: skip
STUDY_TRANSITIONS = {
    ("UNPUBLISHED", "PUBLISH"): "PUBLISHING",
    ("ACTIVE", "PAUSE"): "PAUSED",
    ("PAUSED", "START"): "ACTIVE",
    ("ACTIVE", "STOP"): "AWAITING REVIEW",
    ("PAUSED", "STOP"): "AWAITING REVIEW",
}


PROLIFIC_ID = re.compile(r"[0-9a-f]{24}")
BONUS_PATHS = r"^/api/v1/(submissions/bonus-payments|bulk-bonus-payments/\w+/pay)/$"
CONCURRENT = "A bonus payment request is already being processed; try again later."


def _oid() -> str:
    return secrets.token_hex(12)  # Prolific ids are 24 hex digits


def error(status: int, title: str, detail: Any = "") -> Response:
    """An error answer in Prolific's shape."""
    body = {
        "error": {"status": status, "error_code": 140000 + status, "title": title, "detail": detail}
    }
    return Response(json.dumps(body), status=status, mimetype="application/json")


def ok(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


@dataclass
class FakeProlific:
    """State of the fake and the server around it."""

    studies: dict[str, dict[str, Any]] = field(default_factory=dict)
    submissions: dict[str, dict[str, Any]] = field(default_factory=dict)
    bulk: dict[str, dict[str, Any]] = field(default_factory=dict)
    payments: list[tuple[str, str, float]] = field(default_factory=list)  # (bulk id, pid, amount)
    pending: list[tuple[str, str, float]] = field(default_factory=list)  # accepted, not yet paid
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, auth header)
    # [method, path regex, status, times, after]: after=True does the work, then loses the answer
    faults: list[list[Any]] = field(default_factory=list)
    refuse_ids: dict[str, str] = field(default_factory=dict)  # pid -> why a set-up refuses it
    fee_rate: float = 1 / 3  # Prolific's service fee, as its API reference's example computes
    vat_rate: float = 0.0  # VAT on the fee, where the account pays it
    balance: float = 10.0**9  # the workspace's funds, in cents
    bonus_in_flight: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    # -- test controls -----------------------------------------------------------------------
    def inject(
        self,
        method: str,
        path: str,
        status: int,
        times: int = 1,
        *,
        after: bool = False,
        detail: Any = "",
    ) -> None:
        """Answer the next ``times`` calls of ``method`` to a ``path`` match with ``status``
        (and ``detail`` in the error body); ``after``: do what they ask first (the answer is
        lost on its way back)."""
        self.faults.append([method, re.compile(path), status, times, after, detail])

    def process_payments(self) -> None:
        """Prolific's asynchronous payment: every accepted pay call pays now."""
        for bid, pid, amount in self.pending:
            self.payments.append((bid, pid, amount))
            sid = self.bulk[bid]["study"]
            for sub in self.submissions.values():
                if sub["participant_id"] == pid and sub["study_id"] == sid:
                    sub["bonus_payments"].append(round(amount * 100, 2))
        self.pending.clear()

    def publishing_done(self) -> None:
        """Prolific has processed every publish: PUBLISHING studies are ACTIVE."""
        for study in self.studies.values():
            if study["status"] == "PUBLISHING":
                study["status"] = "ACTIVE"

    def arrive(self, study_id: str, participant_id: str) -> str:
        """A participant starts the study: a new ACTIVE submission; return the URL they open."""
        self.publishing_done()
        study = self.studies[study_id]
        assert study["status"] == "ACTIVE", "only a published study can be taken"
        sid = _oid()
        self.submissions[sid] = {
            "id": sid,
            "participant_id": participant_id,
            "study_id": study_id,
            "status": "ACTIVE",
            "started_at": "2026-11-23T23:00:00Z",
            "completed_at": None,
            "study_code": None,
            "bonus_payments": [],
        }
        return (
            study["external_study_url"]
            .replace("{{%PROLIFIC_PID%}}", participant_id)
            .replace("{{%STUDY_ID%}}", study_id)
            .replace("{{%SESSION_ID%}}", sid)
        )

    def finish(self, session_id: str, code: str | None, *, returned: bool = False) -> None:
        """The participant comes back with ``code``; codes asking to return make them return."""
        sub = self.submissions[session_id]
        study = self.studies[sub["study_id"]]
        action = next(
            (c["actions"][0]["action"] for c in study["completion_codes"] if c["code"] == code),
            None,
        )
        sub["study_code"] = code
        sub["completed_at"] = "2026-11-23T23:20:00Z"
        sub["status"] = "RETURNED" if returned or action == "REQUEST_RETURN" else "AWAITING REVIEW"

    def upload_file(self, study_id: str, text: str) -> str:
        """The researcher pastes a payment file (``participant_id,amount`` lines) into
        Prolific's bulk bonus page and pays it; returns the set-up's id."""
        with self.lock:
            made = self.set_up_bonuses(None, {"study_id": study_id, "csv_bonuses": text})
            assert made.status_code == 201, made.get_data(as_text=True)
            bid = json.loads(made.get_data(as_text=True))["id"]
            assert self.pay_bonuses(None, None, bid).status_code == 202
        return bid

    # -- HTTP --------------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        bonus = request.method == "POST" and re.search(BONUS_PATHS, request.path) is not None
        if bonus:
            with self.lock:
                busy, self.bonus_in_flight = self.bonus_in_flight, True
            if busy:  # another bonus request of this workspace is being handled
                self.calls.append((request.method, request.path, "concurrent"))
                return error(429, "Too many requests", CONCURRENT)(environ, start_response)
        try:
            with self.lock:
                response = self.dispatch(request)
        finally:
            if bonus:
                self.bonus_in_flight = False
        return response(environ, start_response)

    def dispatch(self, req: Request) -> Response:
        auth = req.headers.get("Authorization", "")
        self.calls.append((req.method, req.path, auth))
        self.publishing_done()  # a publish is processed by the time the next request comes
        for fault in self.faults:
            method, pattern, status, times, after, detail = fault
            if times > 0 and method == req.method and pattern.search(req.path):
                fault[3] -= 1
                if after:
                    self.answer(req, auth)
                if status == 429:
                    resp = error(429, "Too many requests", "Request was throttled.")
                    resp.headers["Retry-After"] = "1"
                    return resp
                title = "Invalid request" if status < 500 else "Server error"
                return error(status, title, detail)
        return self.answer(req, auth)

    def answer(self, req: Request, auth: str) -> Response:
        if auth != f"Token {TOKEN}":
            return error(401, "Not authenticated", "Authentication credentials were not provided.")
        try:
            body = json.loads(req.get_data(as_text=True) or "null")
        except ValueError:
            return error(400, "Invalid request", "JSON parse error")
        routes = [
            ("POST", r"/api/v1/studies/", self.create_study),
            ("GET", r"/api/v1/studies/", self.list_studies),
            ("GET", r"/api/v1/submissions/(\w+)/", self.get_submission),
            ("POST", r"/api/v1/studies/(\w+)/transition/", self.transition_study),
            ("GET", r"/api/v1/studies/(\w+)/submissions/", self.list_submissions),
            ("GET", r"/api/v1/studies/(\w+)/", self.get_study),
            ("POST", r"/api/v1/submissions/bulk-approve/", self.bulk_approve),
            ("POST", r"/api/v1/submissions/(\w+)/transition/", self.transition_submission),
            ("POST", r"/api/v1/submissions/bonus-payments/", self.set_up_bonuses),
            ("POST", r"/api/v1/bulk-bonus-payments/(\w+)/pay/", self.pay_bonuses),
        ]
        for method, pattern, handler in routes:
            m = re.fullmatch(pattern, req.path)
            if m and req.method == method:
                return handler(req, body, *m.groups())
        return error(404, "Not found", req.path)

    def create_study(self, req: Request, body: Any) -> Response:
        problems: dict[str, list[str]] = {}
        if not isinstance(body, dict):
            return error(400, "Invalid request", "expected an object")
        for key in ("name", "description", "external_study_url", "prolific_id_option"):
            if not isinstance(body.get(key), str) or not body[key]:
                problems[key] = ["This field is required."]
        url = body.get("external_study_url") or ""
        for placeholder in ("{{%PROLIFIC_PID%}}", "{{%STUDY_ID%}}", "{{%SESSION_ID%}}"):
            if body.get("prolific_id_option") == "url_parameters" and placeholder not in url:
                problems.setdefault("external_study_url", []).append(f"missing {placeholder}")
        for key in ("total_available_places", "reward", "estimated_completion_time"):
            if (
                not isinstance(body.get(key), int)
                or isinstance(body.get(key), bool)
                or body[key] < 1
            ):
                problems[key] = ["A positive integer is required."]
        codes = body.get("completion_codes")
        if not isinstance(codes, list) or not codes:
            problems["completion_codes"] = ["This field is required."]
        else:
            for c in codes:
                if (
                    not c.get("code")
                    or not c.get("code_type")
                    or not isinstance(c.get("actions"), list)
                ):
                    problems["completion_codes"] = ["Each code needs code, code_type and actions."]
        for d in body.get("device_compatibility", []):
            if d not in ("desktop", "tablet", "mobile"):
                problems["device_compatibility"] = [f"{d!r} is not a valid choice."]
        if problems:
            return error(400, "Invalid request", problems)
        sid = _oid()
        self.studies[sid] = {**body, "id": sid, "status": "UNPUBLISHED"}
        return ok(self.studies[sid], 201)

    def list_studies(self, req: Request, body: Any) -> Response:
        rows = [
            {k: s[k] for k in ("id", "name", "internal_name", "status") if k in s}
            for s in self.studies.values()
        ]
        return ok(
            {"results": rows, "_links": {"next": {"href": None}}, "meta": {"count": len(rows)}}
        )

    def get_submission(self, req: Request, body: Any, sid: str) -> Response:
        sub = self.submissions.get(sid)
        if sub is None:
            return error(404, "Not found", "Submission not found")
        # The documented shape of one submission: "participant", not "participant_id".
        shown = {k: v for k, v in sub.items() if k != "participant_id"}
        return ok({**shown, "participant": sub["participant_id"]})

    def get_study(self, req: Request, body: Any, sid: str) -> Response:
        if sid not in self.studies:
            return error(404, "Not found", "Study not found")
        return ok(self.studies[sid])

    def transition_study(self, req: Request, body: Any, sid: str) -> Response:
        study = self.studies.get(sid)
        if study is None:
            return error(404, "Not found", "Study not found")
        target = STUDY_TRANSITIONS.get((study["status"], (body or {}).get("action")))
        if target is None:
            return error(400, "Invalid request", f"cannot {body} a study in {study['status']}")
        study["status"] = target
        return ok(study)

    def list_submissions(self, req: Request, body: Any, sid: str) -> Response:
        if sid not in self.studies:
            return error(404, "Not found", "Study not found")
        rows = [s for s in self.submissions.values() if s["study_id"] == sid]
        page = int(req.args.get("page", "1"))
        chunk = rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        more = page * PAGE_SIZE < len(rows)
        nxt = (
            {"href": f"{self.url}/api/v1/studies/{sid}/submissions/?page={page + 1}"}
            if more
            else {"href": None}
        )
        return ok({"results": chunk, "_links": {"next": nxt}, "meta": {"count": len(rows)}})

    def bulk_approve(self, req: Request, body: Any) -> Response:
        ids = (body or {}).get("submission_ids")
        if not isinstance(ids, list) or not ids:
            return error(400, "Invalid request", {"submission_ids": ["This field is required."]})
        for sid in ids:
            sub = self.submissions.get(sid)
            if sub is None or sub["status"] not in ("AWAITING REVIEW", "APPROVED"):
                return error(400, "Invalid request", f"submission {sid} cannot be approved")
        for sid in ids:
            self.submissions[sid]["status"] = "APPROVED"
        return ok("The request to bulk approve is being processed.")

    def transition_submission(self, req: Request, body: Any, sid: str) -> Response:
        sub = self.submissions.get(sid)
        if sub is None:
            return error(404, "Not found", "Submission not found")
        body = body or {}
        if body.get("action") == "REJECT":
            if len(body.get("message") or "") < 100:
                return error(400, "Invalid request", {"message": ["At least 100 characters."]})
            if body.get("rejection_category") not in CATEGORIES:
                return error(400, "Invalid request", {"rejection_category": ["Invalid choice."]})
            if sub["status"] == "REJECTED":
                return ok(sub)  # idempotent
            if sub["status"] != "AWAITING REVIEW":
                return error(400, "Invalid request", f"cannot reject a {sub['status']} submission")
            sub["status"] = "REJECTED"
            return ok(sub)
        if body.get("action") == "APPROVE" and sub["status"] == "AWAITING REVIEW":
            sub["status"] = "APPROVED"
            return ok(sub)
        return error(400, "Invalid request", f"unsupported transition {body.get('action')!r}")

    def set_up_bonuses(self, req: Request | None, body: Any) -> Response:
        body = body or {}
        sid = body.get("study_id")
        if sid not in self.studies:
            return error(400, "Invalid request", {"study_id": ["Study not found."]})
        lines, wrong = [], []
        for line in str(body.get("csv_bonuses") or "").splitlines():
            pid, _, amount = line.partition(",")
            if not PROLIFIC_ID.fullmatch(pid):
                wrong.append(f"{pid}: is not a valid participant ID")
                continue
            taken = any(
                s["participant_id"] == pid and s["study_id"] == sid
                for s in self.submissions.values()
            )
            if not taken or pid in self.refuse_ids:
                wrong.append(
                    f"{pid}: {self.refuse_ids.get(pid, 'did not take part in this study')}"
                )
                continue
            try:
                value = float(amount)
            except ValueError:
                return error(400, "Invalid request", f"{amount!r} is not an amount")
            lines.append((pid, value))
        if wrong:  # Prolific's 400 explains which IDs are incorrect
            return error(400, "Invalid request", {"csv_bonuses": wrong})
        if not lines:
            return error(400, "Invalid request", {"csv_bonuses": ["This field is required."]})
        bid = _oid()
        amount = round(sum(a for _, a in lines) * 100, 2)  # cents, as documented
        fees = round(amount * self.fee_rate, 2)
        vat = round(fees * self.vat_rate, 2)
        total = round(amount + fees + vat, 2)
        self.bulk[bid] = {"lines": lines, "study": sid, "paid": 0, "total": total}
        return ok(
            {
                "id": bid,
                "study": sid,
                "amount": amount,
                "fees": fees,
                "vat": vat,
                "total_amount": total,
            },
            201,
        )

    def pay_bonuses(self, req: Request | None, body: Any, bid: str) -> Response:
        if bid not in self.bulk:
            return error(404, "Not found", "Bulk bonus payment not found")
        if self.bulk[bid]["total"] > self.balance:
            return error(
                400,
                "Invalid request",
                "Insufficient balance in your workspace to pay these bonuses; top up and retry.",
            )
        self.balance -= self.bulk[bid]["total"]
        self.bulk[bid]["paid"] += 1
        for pid, amount in self.bulk[bid]["lines"]:  # not idempotent, as Prolific warns
            self.pending.append((bid, pid, amount))
        return ok(f"Bulk bonus payment with ID {bid} is being processed asynchronously.", 202)

    def paid_to(self, participant_id: str) -> float:
        """Everything paid to a participant as bonuses (accepted pay calls included)."""
        everything = self.payments + self.pending
        return round(sum(a for _, pid, a in everything if pid == participant_id), 2)


class FakeServer:
    """Run a :class:`FakeProlific` on 127.0.0.1 (a random port) in a thread."""

    def __init__(self) -> None:
        self.fake = FakeProlific()
        self.server = make_server("127.0.0.1", 0, self.fake, threaded=True)
        self.fake.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
