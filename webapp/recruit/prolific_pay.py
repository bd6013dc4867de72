"""Prolific bonuses, paid once: set up, checked just before paying, paid, then confirmed.

Prolific pays bonuses in two calls: ``POST /api/v1/submissions/bonus-payments/`` sets them up
(it pays nothing and returns an id) and ``POST /api/v1/bulk-bonus-payments/{id}/pay/`` pays
that set-up, asynchronously ("in the following minutes") and *not idempotently*: paying one
set-up twice pays twice. So, with the ledger's claims (:mod:`webapp.recruit.ledger`):

1. rows are claimed (``claimed``) and set up; Prolific refusing some IDs (its 400 names
   them) marks those ``refused`` and sets the others up without them; an answer that comes
   after the claim was taken over changes nothing and pays nothing;
2. just before a set-up is paid, every person's status is read from Prolific again: a
   rejected or returned submission drops the whole set-up (rows new again, set up afresh
   without that person by the next run);
3. the rows are marked ``paying`` before the pay call; Prolific's acceptance makes them
   ``sent``, a refusal or a connection that never opened puts them back, and an unknown
   outcome leaves them ``paying``: never sent again;
4. a later run (``bonus`` or ``settle``) reads each submission's ``bonus_payments`` (cents):
   a listed amount makes its row ``paid``. Every run reads them first for every row it
   might pay, whatever its state: a bonus Prolific already lists (a payment file pasted into
   Prolific, a payment by hand) is recorded ``paid`` and never set up. A set-up whose fees,
   VAT or total come out higher than what was confirmed (the ``fee_rate`` of the recruiter
   block) is never paid. A ``paying`` row Prolific still does not list 24
   hours after the call is reported, never sent again on FrameLab's own judgement: the pay
   call is not idempotent and Prolific offers no way to read its state, so a late payment
   would be a second one. The researcher checks on Prolific and releases it
   (``settle --release CODE``); only then does the next ``bonus`` run set it up again.

A set-up is paid only when every row carrying its id is still ``set_up`` and confirmed for
this run; any other set-up is dropped (its rows new again): a set-up pays everyone in it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import select

from webapp.extensions import db
from webapp.models import BonusPayment, Platform, PlatformIdentity, Recruitment
from webapp.recruit import ledger
from webapp.recruit.bonus_actions import payable
from webapp.recruit.errors import NotSent, RecruitError, Refused
from webapp.recruit.prolific_answers import answer_dict, prolific_id
from webapp.recruit.results import Report, Submission, fee
from webapp.services.entry import canonical_spelling

if TYPE_CHECKING:
    from webapp.definition import RecruiterSettings

Row = tuple[BonusPayment, PlatformIdentity]


class PayingRecruiter(Protocol):
    """What the payments need of :class:`webapp.recruit.prolific.ProlificRecruiter` (named by
    its members: that module imports this one)."""

    settings: RecruiterSettings
    last_submissions: list[Submission]

    def listing_row(self) -> Recruitment: ...
    def bonus_ledger(self, *, open_only: bool = True) -> list[Row]: ...
    def fetch_submissions(self, external_id: str) -> list[Submission]: ...
    def bonus_payments(self, submission_id: str) -> list[float]: ...
    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        ids: dict[str, Any] | None = None,
        idempotent: bool,
    ) -> Any: ...


# States a row waits in before its pay call: the run reads Prolific's record before paying it.
OPEN = (ledger.NEW, ledger.CLAIMED, ledger.SET_UP)
SET_UP_PATH = "/api/v1/submissions/bonus-payments/"


def worker(ident: PlatformIdentity) -> str:
    """The participant's Prolific ID as Prolific's lists spell it."""
    return canonical_spelling(Platform.prolific, ident.external_id)


def _ids(rows: list[Row]) -> list[int]:
    return [b.id for b, _ in rows]


def _dollars(amount: int) -> str:
    return f"{amount // 100}.{amount % 100:02d}"


class ProlificPayments:
    """One run's payment of a study's Prolific ledger rows (the run's one claim)."""

    def __init__(self, recruiter: PayingRecruiter, claim: ledger.Claim) -> None:
        self.r = recruiter
        self.claim = claim
        self.listing = recruiter.listing_row()

    def _subs(self) -> dict[str, Submission]:
        return {s.worker_id: s for s in self.r.last_submissions}

    @staticmethod
    def _current(rows: list[Row]) -> list[Row]:
        db.session.expire_all()  # states as the database has them now
        return rows

    # -- the run --------------------------------------------------------------------------
    def pay(self, rows: list[Row], report: Report, allowed: set[int]) -> None:
        """Record what Prolific already lists, set up the ``allowed`` new rows, pay every
        set-up of ``allowed`` rows this run holds (see module)."""
        before = {b.id: b.platform_state for b, _ in rows}
        found = self.confirm(rows, report, (ledger.SENT, ledger.FILED, *OPEN))
        for b, i in rows:
            if b.id in found and before[b.id] in OPEN:
                report.lines.append(
                    f"recorded as paid: {i.participant.code} ({self.r.cents(b.amount_cents)}): "
                    "Prolific already lists this bonus (a payment file, or a payment by hand); "
                    "not paid again"
                )
        self.set_ups(allowed)  # drops those it may not pay before new rows are set up
        self.set_up(rows, report, allowed)
        for bulk, group in self.set_ups(allowed).items():
            self._pay_one(bulk, group, report)

    def confirm(self, rows: list[Row], report: Report, states: tuple[str | None, ...]) -> set[int]:
        """Mark ``paid`` the rows in ``states`` whose amount Prolific lists on the submission.

        Returns the ids of the rows so recorded. The participants whose submission could not
        be read are left as they are (they cannot be judged).
        """
        waiting = [(b, i) for b, i in self._current(rows) if b.platform_state in states]
        subs = self._subs()
        listed: dict[int, list[float]] = {}
        for b, i in waiting:
            sub = subs.get(worker(i))
            if sub is not None and b.participant_id not in listed:
                listed[b.participant_id] = self.r.bonus_payments(sub.submission_id)
        if not listed:
            return set()
        already: dict[int, list[int]] = defaultdict(list)
        for b in db.session.scalars(
            select(BonusPayment).where(
                BonusPayment.participant_id.in_(listed),
                BonusPayment.platform == Platform.prolific,
                BonusPayment.platform_state == ledger.PAID,
            )
        ):
            already[b.participant_id].append(b.amount_cents)
        found = ledger.matched_amounts(
            [b for b, _ in waiting if b.participant_id in listed], listed, already
        )
        done: set[int] = set()
        for state in states:
            held = self.claim.take([b.id for b in found if b.platform_state == state], (state,))
            self.claim.move(held, state, ledger.PAID, keep=False, paid_at=ledger.clock())
            done |= held
        return done

    def set_up(self, rows: list[Row], report: Report, allowed: set[int]) -> None:
        """Claim the ``allowed`` new rows of people Prolific lists as payable, set them up."""
        subs = self._subs()
        candidates: list[Row] = []
        for b, i in self._current(rows):
            if b.platform_state not in (ledger.NEW, ledger.CLAIMED) or b.id not in allowed:
                continue
            sub = subs.get(worker(i))
            if sub is None:
                if b.platform_state is ledger.NEW:
                    # Prolific refuses a whole set-up naming someone who did not take part.
                    report.lines.append(
                        f"not paid here: {i.participant.code}: not a participant of Prolific "
                        f"study {self.listing.external_id} (pay with `framelab bonus "
                        "--platform prolific`)"
                    )
                continue
            if payable(sub.status):
                candidates.append((b, i))
        held = self.claim.take(_ids(candidates), (ledger.NEW, ledger.CLAIMED), to=ledger.CLAIMED)
        queue = [[(b, i) for b, i in candidates if b.id in held]]
        for _ in range(2 * len(candidates) + 2):  # each refusal shrinks or splits a group
            if not queue:
                break
            group = queue.pop(0)
            if group:
                queue += self._set_up_group(group, report)

    def _set_up_group(self, group: list[Row], report: Report) -> list[list[Row]]:
        """One set-up call for ``group`` (held, ``claimed``); returns groups to try again."""
        ids = _ids(group)
        asked = sum(b.amount_cents for b, _ in group)
        csv_bonuses = "\n".join(f"{worker(i)},{_dollars(b.amount_cents)}" for b, i in group)
        study = self.listing.external_id
        try:
            data = self.r.call(
                "POST",
                SET_UP_PATH,
                json={"study_id": study, "csv_bonuses": csv_bonuses},
                ids={"study": study, "bonuses": len(group)},
                idempotent=False,  # a set-up pays nothing: a lost one is simply never paid
            )
        except Refused as exc:
            if exc.status != 400:  # not about the IDs (the token, too many requests, ...)
                self.claim.move(ids, ledger.CLAIMED, ledger.NEW, keep=False)
                report.lines.append(f"bonus set-up not done: {exc}; nothing was paid")
                return []
            named = [(b, i) for b, i in group if worker(i) in exc.raw.lower()]
            if not named and len(group) > 1:
                return [[row] for row in group]  # unexplained: alone, nobody blocks the others
            for b, i in named or group:
                self.claim.move(
                    [b.id],
                    ledger.CLAIMED,
                    ledger.REFUSED,
                    keep=False,
                    platform_note=ledger.note(f"Prolific refused this bonus: {exc.reason or exc}"),
                )
                report.lines.append(f"refused by Prolific: {i.participant.code}: {exc.reason}")
            rest = [row for row in group if row not in (named or group)]
            return [rest] if rest else []
        except RecruitError as exc:  # not sent, or no answer: a set-up pays nothing by itself
            self.claim.move(ids, ledger.CLAIMED, ledger.NEW, keep=False)
            report.lines.append(
                f"bonus set-up not done: {exc}; nothing was paid; the next run sets them up again"
            )
            return []
        try:
            body = answer_dict(data, "the bonus set-up")
            bulk = prolific_id(body.get("id"), "the bonus set-up")
            self._check_charge(bulk, body, asked)
        except RecruitError as exc:
            self.claim.move(ids, ledger.CLAIMED, ledger.NEW, keep=False)
            report.lines.append(f"bonus set-up not used: {exc}")
            report.counts["not_set_up"] = report.counts.get("not_set_up", 0) + len(ids)
            return []
        self.claim.move(ids, ledger.CLAIMED, ledger.SET_UP, platform_payment_id=bulk)
        report.lines.append(
            f"set up bonus payment {bulk} ({len(group)} bonuses, {self.r.cents(asked)})"
        )
        return []

    def _check_charge(self, bulk: str, body: dict[str, object], asked: int) -> None:
        """Refuse a set-up Prolific would charge more for than was confirmed: its ``amount``
        must be the bonuses asked for, and ``total_amount`` (or amount, ``fees`` and ``vat``)
        at most those plus the fees at the recruiter block's ``fee_rate`` (what the
        confirmation showed). Prolific gives fractions of a cent; less than one is rounding.
        """

        def number(key: str) -> float | None:
            value = body.get(key)
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            return float(value) if ok else None  # type: ignore[arg-type]

        amount, fees, vat, total = (number(k) for k in ("amount", "fees", "vat", "total_amount"))
        if amount is not None and round(amount) != asked:
            raise RecruitError(
                f"Prolific set up {bulk} for {round(amount)} cents, not the {asked} "
                "asked for; it is never paid"
            )
        confirmed = asked + fee(asked, self.r.settings.fee_rate)
        charged = total if total is not None else asked + (fees or 0.0) + (vat or 0.0)
        if charged - confirmed >= 1:
            raise RecruitError(
                f"Prolific would charge {self.r.cents(round(charged))} for set-up {bulk} (bonuses "
                f"{self.r.cents(asked)}, fees {self.r.cents(round(fees or 0))}, "
                f"VAT {self.r.cents(round(vat or 0))}), "
                f"more than the {self.r.cents(confirmed)} confirmed at fee_rate "
                f"{self.r.settings.fee_rate:g}; it is never paid. Set the recruiter block's "
                "fee_rate to your account's rate with VAT, then confirm again"
            )

    def set_ups(self, allowed: set[int]) -> dict[str, list[Row]]:
        """The set-ups this run may pay, held: every row carrying the set-up's id is
        ``set_up`` and in ``allowed``. Any other set-up this run can hold is dropped (its
        rows new again; a set-up pays nothing), since paying it would pay everyone in it."""
        groups: dict[str, list[Row]] = defaultdict(list)
        for b, i in self.r.bonus_ledger(open_only=False):
            if b.platform_payment_id:
                groups[b.platform_payment_id].append((b, i))
        out: dict[str, list[Row]] = {}
        for bulk, group in groups.items():
            ids = {b.id for b, _ in group if b.platform_state == ledger.SET_UP}
            if not ids:
                continue
            held = self.claim.take(ids, (ledger.SET_UP,))
            if held != ids:
                self.claim.release(held, ledger.SET_UP)
                continue  # another run holds (part of) it
            if len(ids) == len(group) and ids <= allowed:
                out[bulk] = group
            else:
                self.claim.move(
                    ids, ledger.SET_UP, ledger.NEW, keep=False, platform_payment_id=None
                )
        return out

    def _pay_one(self, bulk: str, group: list[Row], report: Report) -> None:
        ids = _ids(group)
        try:  # immediately before paying: where every person stands on Prolific now
            now = {
                s.worker_id: s.status for s in self.r.fetch_submissions(self.listing.external_id)
            }
        except RecruitError:
            self.claim.release(ids, ledger.SET_UP)
            raise
        blocked = [(b, i) for b, i in group if not payable(now.get(worker(i)))]
        if blocked:
            self.claim.move(ids, ledger.SET_UP, ledger.NEW, keep=False, platform_payment_id=None)
            for _, i in blocked:
                report.lines.append(
                    f"not paid: {i.participant.code}: {now.get(worker(i)) or 'not listed'} on "
                    f"Prolific just before paying; set-up {bulk} is dropped (a set-up pays "
                    "nothing) and the others are set up again by the next run"
                )
            report.counts["withheld"] = report.counts.get("withheld", 0) + len(blocked)
            return
        self.claim.move(ids, ledger.SET_UP, ledger.PAYING, sent_at=ledger.clock())
        try:
            self.r.call(
                "POST",
                f"/api/v1/bulk-bonus-payments/{bulk}/pay/",
                ids={"bulk_bonus_payment": bulk},
                idempotent=False,
            )
        except (NotSent, Refused) as exc:  # nothing was paid: the next run pays the set-up
            self.claim.move(ids, ledger.PAYING, ledger.SET_UP, keep=False, sent_at=None)
            report.lines.append(f"payment {bulk} not made: {exc}")
            return
        except RecruitError as exc:  # sent, no answer: never sent again; settle resolves it
            self.claim.move(ids, ledger.PAYING, ledger.PAYING, keep=False)
            report.lines.append(f"payment {bulk}: {exc}")
            return
        self.claim.move(ids, ledger.PAYING, ledger.SENT, keep=False)
        report.counts["sent"] = report.counts.get("sent", 0) + len(ids)
        report.counts["sent_cents"] = report.counts.get("sent_cents", 0) + sum(
            b.amount_cents for b, _ in group
        )

    # -- settling -------------------------------------------------------------------------
    def settle(
        self, rows: list[Row], report: Report, *, retry_refused: bool, release: frozenset[str]
    ) -> None:
        """Confirm what Prolific lists as paid; make new again rows of runs that died (claims
        expired), refused rows if asked, and unsettled payments the researcher released.
        Sends no payment."""
        self.confirm(rows, report, (ledger.SENT, ledger.PAYING, ledger.FILED))
        subs = self._subs()
        checked = {b.participant_id for b, i in rows if worker(i) in subs}
        now = ledger.clock()
        released: set[str] = set()
        for b, i in self._current(rows):
            code, state = i.participant.code, b.platform_state
            if state == ledger.PAYING:
                if b.participant_id not in checked:
                    report.lines.append(
                        f"cannot settle {code}: not among the study's submissions on Prolific"
                    )
                elif b.sent_at is not None and b.sent_at < now - ledger.SETTLE_AFTER:
                    if code not in release:
                        report.lines.append(
                            f"unsettled {code}: payment {b.platform_payment_id} "
                            f"({_dollars(b.amount_cents)}) is not listed 24 hours after the "
                            "call. Check the participant's payments on Prolific; if it was not "
                            f"made, `settle --release {code}` lets the next `bonus` run pay it"
                        )
                        continue
                    released.add(code)
                    held = self.claim.take([b.id], (ledger.PAYING,))
                    self.claim.move(
                        held,
                        ledger.PAYING,
                        ledger.NEW,
                        keep=False,
                        platform_payment_id=None,
                        sent_at=None,
                        platform_note=ledger.note(
                            f"pay call of {b.platform_payment_id} not made, as the researcher "
                            "checked on Prolific"
                        ),
                    )
                    report.lines.append(
                        f"released {code}: payment {b.platform_payment_id} was not made (checked "
                        "on Prolific by the researcher); the next `bonus` run sets it up again"
                    )
                else:
                    report.lines.append(
                        f"not yet settled {code}: payment {b.platform_payment_id} is not listed "
                        "yet; settle again 24 hours after the call"
                    )
            elif state in (ledger.CLAIMED, ledger.SET_UP):
                held = self.claim.take([b.id], (state,))  # only once the claim expired
                back = ledger.NEW if state == ledger.CLAIMED else ledger.SET_UP
                self.claim.move(held, state, back, keep=False)
                if held:
                    report.lines.append(f"released {code}: its run stopped before paying")
            elif state == ledger.REFUSED and retry_refused:
                held = self.claim.take([b.id], (ledger.REFUSED,))
                self.claim.move(held, ledger.REFUSED, ledger.NEW, keep=False, platform_note=None)
                report.lines.append(f"{code}: refused bonus is new again; `bonus` sends it")
        for code in sorted(release - released):
            report.lines.append(
                f"not released {code}: no payment of theirs is unsettled 24 hours after its call"
            )
