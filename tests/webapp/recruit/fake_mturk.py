"""A stateful fake of MTurk's requester API behind a real boto3 client, for tests.

boto3 validates every call's parameters against botocore's MTurk service model as usual; the
fake answers from botocore's ``before-call`` event (the hook botocore's own Stubber uses), so
nothing goes on the network and nothing else of the client is replaced. It refuses what MTurk
refuses, as its API reference documents:

- ``CreateHITWithHITType`` with a ``UniqueRequestToken`` seen in the last 24 hours answers a
  ``RequestError`` whose ``TurkErrorCode`` is ``AWS.MechanicalTurk.HitAlreadyExists`` and
  whose message contains the HIT id; after 24 hours the same token posts a *new* HIT;
- ``SendBonus`` with a token seen in the last 24 hours answers an error naming the request,
  and pays nothing more; after 24 hours the same token pays again;
- ``CreateQualificationType`` refuses a second type of the same name;
- ``CreateHITType`` returns the existing HIT type for the same values;
- ``ApproveAssignment``/``RejectAssignment`` only for a ``Submitted`` assignment;
- any parameter that breaks the ``pattern`` or ``max`` of its shape in botocore's MTurk service
  model (a worker ID is ``^A[A-Z0-9]+$``, an assignment or HIT id ``^[A-Z0-9]+$``) is refused
  with a ``ValidationException``, as the service refuses it (botocore's client checks types
  and required members, not patterns);
- ``ListHITs``, ``ListAssignmentsForHIT``, ``ListBonusPayments`` and
  ``ListQualificationTypes`` answer in pages of :data:`PAGE` with a ``NextToken``;
- an assignment carries ``SubmitTime`` and ``AutoApprovalTime`` (its HIT type's
  ``AutoApprovalDelayInSeconds`` later: MTurk approves it by itself then).

:meth:`FakeMTurk.run_bonus_file` is the researcher sending a ``SendBonus`` plan file.

:meth:`FakeMTurk.fail` makes the next calls of an operation throttle, fail with a
``ServiceFault``, never connect, or time out reading the answer (before or after MTurk did
the work); :attr:`FakeMTurk.now` is MTurk's clock (move it to pass 24 hours).
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
TOKEN_MEMORY = timedelta(hours=24)
PAGE = 2  # small, so the client must follow NextToken


def sandbox_client() -> Any:
    """A boto3 MTurk client for the sandbox with made-up credentials (it sends nothing
    while a Stubber or :class:`FakeMTurk` answers it)."""
    return boto3.client(
        "mturk",
        region_name="us-east-1",
        endpoint_url=ENDPOINT,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="not-a-secret",
    )


def _invalid(shape: Any, value: Any, where: str) -> list[str]:
    """Every breach of the model's ``pattern`` and ``max`` under ``shape`` (recursively)."""
    if shape is None:
        return []
    if shape.type_name == "structure" and isinstance(value, dict):
        return [
            e
            for name, member in shape.members.items()
            if name in value
            for e in _invalid(member, value[name], f"{where}.{name}".lstrip("."))
        ]
    if shape.type_name == "list" and isinstance(value, list):
        return [e for i, v in enumerate(value) for e in _invalid(shape.member, v, f"{where}[{i}]")]
    if shape.type_name == "string" and isinstance(value, str):
        out = []
        pattern, most = shape.metadata.get("pattern"), shape.metadata.get("max")
        if pattern and re.search(pattern, value) is None:
            out.append(
                f"Value {value!r} at '{where}' failed to satisfy constraint: Member must "
                f"satisfy regular expression pattern: {pattern}"
            )
        if most is not None and len(value) > most:
            out.append(f"Value at '{where}' failed to satisfy constraint: length <= {most}")
        return out
    return []


def _page(key: str, rows: list[dict[str, Any]], p: dict[str, Any]) -> dict[str, Any]:
    """One page of ``rows`` as MTurk's list operations answer (``NextToken`` when more)."""
    start = int(p.get("NextToken") or 0)
    page = rows[start : start + PAGE]
    more = start + PAGE < len(rows)
    return {
        key: [dict(r) for r in page],
        "NumResults": len(page),
        **({"NextToken": str(start + PAGE)} if more else {}),
    }


def _id(n: int = 30) -> str:
    return "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(n))


class TurkError(Exception):
    """An error answer: ``code`` is the HTTP-level code (RequestError or ServiceFault)."""

    def __init__(self, message: str, turk: str = "", code: str = "RequestError", status: int = 400):
        super().__init__(message)
        self.code, self.turk, self.status = code, turk, status


@dataclass
class FakeMTurk:
    """MTurk's state; :meth:`client` gives a boto3 client answered by it."""

    now: datetime = field(default_factory=lambda: datetime(2026, 11, 24, 12, tzinfo=UTC))
    hit_types: dict[str, dict[str, Any]] = field(default_factory=dict)
    qualification_types: dict[str, dict[str, Any]] = field(default_factory=dict)
    hits: dict[str, dict[str, Any]] = field(default_factory=dict)
    assignments: dict[str, dict[str, Any]] = field(default_factory=dict)
    bonuses: list[dict[str, Any]] = field(default_factory=list)
    hit_tokens: dict[str, tuple[str, datetime]] = field(default_factory=dict)
    bonus_tokens: dict[str, datetime] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    refused: list[tuple[str, list[str]]] = field(default_factory=list)  # validation errors
    faults: list[list[Any]] = field(default_factory=list)  # [operation, kind, times, after]

    # -- test controls -----------------------------------------------------------------------
    def client(self) -> Any:
        """A boto3 MTurk client whose calls this fake answers (parameters still validated)."""
        client = sandbox_client()
        client.meta.events.register("before-parameter-build.mturk", self._keep_params)
        client.meta.events.register("before-call.mturk", self._answer)
        return client

    def fail(self, operation: str, kind: str, times: int = 1, *, after: bool = False) -> None:
        """The next ``times`` calls of ``operation`` (API name) fail: ``kind`` is
        ``throttle``, ``fault`` (ServiceFault), ``connect`` (never sent) or ``read`` (no
        answer; ``after``: MTurk did the work first)."""
        self.faults.append([operation, kind, times, after])

    def assign(self, hit_id: str, worker: str, assignment: str, status: str = "Submitted") -> None:
        """A worker submitted ``assignment`` of ``hit_id``."""
        hit_type = self.hit_types.get(self.hits.get(hit_id, {}).get("HITTypeId", ""), {})
        delay = hit_type.get("AutoApprovalDelayInSeconds", 30 * 24 * 3600)  # MTurk's default
        self.assignments[assignment] = {
            "AssignmentId": assignment,
            "WorkerId": worker,
            "HITId": hit_id,
            "AssignmentStatus": status,
            "SubmitTime": self.now,
            "AutoApprovalTime": self.now + timedelta(seconds=delay),
        }

    def run_bonus_file(self, text: str) -> None:
        """The researcher runs a ``SendBonus`` plan (``framelab bonus --platform mturk``'s
        CSV) against MTurk, one call per row with its token, as a script of theirs would."""
        client = self.client()
        for row in csv.DictReader(io.StringIO(text)):
            client.send_bonus(
                WorkerId=row["WorkerId"],
                AssignmentId=row["AssignmentId"],
                BonusAmount=row["BonusAmount"],
                Reason=row["Reason"],
                UniqueRequestToken=row["UniqueRequestToken"],
            )

    def paid(self, assignment: str) -> list[str]:
        """The bonus amounts paid on an assignment."""
        return [b["BonusAmount"] for b in self.bonuses if b["AssignmentId"] == assignment]

    # -- the botocore hooks ------------------------------------------------------------------
    @staticmethod
    def _keep_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["fake_mturk_params"] = dict(params)

    def _answer(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        operation = model.name
        params = context.get("fake_mturk_params", {})
        self.calls.append(operation)
        broken = _invalid(model.input_shape, params, "")
        if broken:
            self.refused.append((operation, broken))
            return self._error(
                TurkError(
                    f"{len(broken)} validation error(s) detected: " + "; ".join(broken),
                    code="ValidationException",
                )
            )
        for fault in self.faults:
            op, kind, times, after = fault
            if op == operation and times > 0:
                fault[2] -= 1
                if kind == "connect":
                    raise EndpointConnectionError(endpoint_url=ENDPOINT)
                if kind == "read":
                    if after:
                        with contextlib.suppress(TurkError):  # a refusal, lost on the way
                            self._handle(operation, params)
                    raise ReadTimeoutError(endpoint_url=ENDPOINT)
                if kind == "throttle":
                    return self._error(TurkError("Rate exceeded", code="ThrottlingException"))
                return self._error(TurkError("Try again", code="ServiceFault", status=500))
        try:
            body = self._handle(operation, params)
        except TurkError as exc:
            return self._error(exc)
        return AWSResponse(None, 200, {}, None), {
            **body,
            "ResponseMetadata": {"HTTPStatusCode": 200},
        }

    @staticmethod
    def _error(exc: TurkError) -> Any:
        parsed = {
            "Error": {"Code": exc.code, "Message": str(exc)},
            "ResponseMetadata": {"HTTPStatusCode": exc.status},
            "Message": str(exc),
            **({"TurkErrorCode": exc.turk} if exc.turk else {}),
        }
        return AWSResponse(None, exc.status, {}, None), parsed

    def _handle(self, operation: str, p: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"op_{operation}", None)
        if handler is None:
            raise TurkError(f"{operation} is not simulated", code="ServiceFault", status=500)
        return handler(p)

    # -- operations --------------------------------------------------------------------------
    def op_CreateQualificationType(self, p: dict[str, Any]) -> dict[str, Any]:
        if any(q["Name"] == p["Name"] for q in self.qualification_types.values()):
            raise TurkError(
                f"You have already created a QualificationType with this name: {p['Name']}"
            )
        qid = _id()
        self.qualification_types[qid] = {
            "QualificationTypeId": qid,
            "Name": p["Name"],
            "Description": p["Description"],
            "QualificationTypeStatus": p["QualificationTypeStatus"],
        }
        return {"QualificationType": dict(self.qualification_types[qid])}

    def op_ListQualificationTypes(self, p: dict[str, Any]) -> dict[str, Any]:
        found = [q for q in self.qualification_types.values() if p.get("Query", "") in q["Name"]]
        return _page("QualificationTypes", found, p)

    def op_CreateHITType(self, p: dict[str, Any]) -> dict[str, Any]:
        for tid, values in self.hit_types.items():
            if values == p:  # MTurk returns the existing type for the same values
                return {"HITTypeId": tid}
        tid = _id()
        self.hit_types[tid] = dict(p)
        return {"HITTypeId": tid}

    def op_CreateHITWithHITType(self, p: dict[str, Any]) -> dict[str, Any]:
        if p["HITTypeId"] not in self.hit_types:
            raise TurkError(f"Hit type {p['HITTypeId']} does not exist.")
        token = p.get("UniqueRequestToken")
        if token and token in self.hit_tokens:
            hit_id, when = self.hit_tokens[token]
            if self.now - when < TOKEN_MEMORY:
                raise TurkError(
                    f'There is already a HIT with the given token: "{hit_id}". (1732449600000)',
                    turk="AWS.MechanicalTurk.HitAlreadyExists",
                )
        hit_id = _id()
        self.hits[hit_id] = {
            "HITId": hit_id,
            "HITTypeId": p["HITTypeId"],
            "HITStatus": "Assignable",
            "MaxAssignments": p["MaxAssignments"],
            "RequesterAnnotation": p.get("RequesterAnnotation", ""),
            "CreationTime": self.now,
            "Expiration": self.now + timedelta(seconds=p["LifetimeInSeconds"]),
        }
        if token:
            self.hit_tokens[token] = (hit_id, self.now)
        return {"HIT": dict(self.hits[hit_id])}

    def op_GetHIT(self, p: dict[str, Any]) -> dict[str, Any]:
        if p["HITId"] not in self.hits:
            raise TurkError(f"Hit {p['HITId']} does not exist.")
        return {"HIT": dict(self.hits[p["HITId"]])}

    def op_ListHITs(self, p: dict[str, Any]) -> dict[str, Any]:
        return _page("HITs", list(self.hits.values()), p)

    def op_UpdateExpirationForHIT(self, p: dict[str, Any]) -> dict[str, Any]:
        if p["HITId"] not in self.hits:
            raise TurkError(f"Hit {p['HITId']} does not exist.")
        self.hits[p["HITId"]]["Expiration"] = p["ExpireAt"]
        return {}

    def op_ListAssignmentsForHIT(self, p: dict[str, Any]) -> dict[str, Any]:
        rows = [a for a in self.assignments.values() if a["HITId"] == p["HITId"]]
        return _page("Assignments", rows, p)

    def op_GetAssignment(self, p: dict[str, Any]) -> dict[str, Any]:
        a = self.assignments.get(p["AssignmentId"])
        if a is None:
            raise TurkError(f"Assignment {p['AssignmentId']} does not exist.")
        return {"Assignment": dict(a), "HIT": dict(self.hits.get(a["HITId"], {}))}

    def _review(self, p: dict[str, Any], to: str) -> dict[str, Any]:
        a = self.assignments.get(p["AssignmentId"])
        if a is None or a["AssignmentStatus"] != "Submitted":
            state = a["AssignmentStatus"] if a else "unknown"
            raise TurkError(f"This operation can be called with a status of: Submitted ({state})")
        a["AssignmentStatus"] = to
        return {}

    def op_ApproveAssignment(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._review(p, "Approved")

    def op_RejectAssignment(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._review(p, "Rejected")

    def op_AssociateQualificationWithWorker(self, p: dict[str, Any]) -> dict[str, Any]:
        if p["QualificationTypeId"] not in self.qualification_types:
            raise TurkError("QualificationType does not exist.")
        return {}

    def op_SendBonus(self, p: dict[str, Any]) -> dict[str, Any]:
        a = self.assignments.get(p["AssignmentId"])
        if a is None or a["WorkerId"] != p["WorkerId"]:
            raise TurkError("The worker did not work on this assignment.")
        token = p.get("UniqueRequestToken")
        if (
            token
            and token in self.bonus_tokens
            and self.now - self.bonus_tokens[token] < TOKEN_MEMORY
        ):
            raise TurkError(f"The request with this token was already processed: {_id(20)}")
        self.bonuses.append(
            {
                "WorkerId": p["WorkerId"],
                "BonusAmount": p["BonusAmount"],
                "AssignmentId": p["AssignmentId"],
                "Reason": p["Reason"],
                "GrantTime": self.now,
            }
        )
        if token:
            self.bonus_tokens[token] = self.now
        return {}

    def op_ListBonusPayments(self, p: dict[str, Any]) -> dict[str, Any]:
        rows = [b for b in self.bonuses if b["AssignmentId"] == p.get("AssignmentId")]
        return _page("BonusPayments", rows, p)
