"""The study YAML's ``recruiter:`` block: which recruiter runs the study, and on what terms.

Validated with the located errors of :mod:`webapp.validation` (file, path, reason, line) into
:class:`webapp.definition.RecruiterSettings`::

    recruiter:
      platform: prolific        # or mturk
      places: 70
      reward: 3.00              # default: payment.base, in payment.currency
      estimated_minutes: 12     # default: the study's estimated_minutes
      fee_rate: 0.3334          # Prolific's fee on rewards and bonuses with any VAT (default 1/3)
      devices: [desktop]        # Prolific: desktop, tablet, mobile
      eligibility:              # Prolific filters, as its API takes them
        - {filter_id: current-country-of-residence, selected_values: ["1"]}
      qualifications:           # MTurk QualificationRequirements (names or type ids)
        - {type: approval_rate, comparator: GreaterThanOrEqualTo, value: 95}
        - {type: locale, comparator: In, locales: [US, GB]}
      lifetime_hours: 72        # MTurk: how long the HIT can be found
      assignment_minutes: 60    # MTurk: time a worker has once they accept
      keywords: survey, decisions
"""

from __future__ import annotations

import re
from typing import Any

from webapp.definition import Payment, RecruiterSettings, Recruitment
from webapp.validation import (
    Where,
    check_keys,
    get_int,
    get_line,
    get_list,
    get_mapping,
    get_money,
    get_number,
    written_key,
)

RECRUITERS = ("prolific", "mturk")
_QUAL_ID = re.compile(r"^[0-9A-Z]{20,64}$")
PROLIFIC_DEVICES = ("desktop", "tablet", "mobile")
# Prolific's service fee on rewards and bonuses: a third, as its own answers compute it (the
# API reference's bonus set-up: fees 283.34 on 850). Each account's invoice says its own rate;
# a bonus set-up whose fees and VAT come out above this rate's is never paid.
DEFAULT_PROLIFIC_FEE = 1 / 3
# MTurk's system qualification types (documented in the MTurk API reference). Masters has a
# different id in the sandbox.
MTURK_SYSTEM_QUALIFICATIONS = {
    "approval_rate": "000000000000000000L0",
    "approved_hits": "00000000000000000040",
    "locale": "00000000000000000071",
    "adult": "00000000000000000060",
}
MTURK_MASTERS = {
    "production": "2F1QJWKUDD8XADTFD2Q0G6UTO95ALH",
    "sandbox": "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6",
}
MTURK_COMPARATORS = (
    "LessThan",
    "LessThanOrEqualTo",
    "GreaterThan",
    "GreaterThanOrEqualTo",
    "EqualTo",
    "NotEqualTo",
    "Exists",
    "DoesNotExist",
    "In",
    "NotIn",
)
_KEYS = {
    "platform",
    "places",
    "estimated_minutes",
    "fee_rate",
    "devices",
    "eligibility",
    "qualifications",
    "lifetime_hours",
    "assignment_minutes",
    "keywords",
    "block_screened_out",
}


def _eligibility(raw: Any, where: Where) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(get_list(raw, where)):
        w = where.at(i)
        item = get_mapping(item, w)
        check_keys(item, {"filter_id", "selected_values", "selected_range"}, w)
        filter_id = get_line(item, "filter_id", w, max_len=100)
        if ("selected_values" in item) == ("selected_range" in item):
            raise w.error("give exactly one of selected_values (a list) or selected_range")
        if "selected_values" in item:
            values = get_list(item["selected_values"], w.at("selected_values"), min_len=1)
            out.append({"filter_id": filter_id, "selected_values": [str(v) for v in values]})
        else:
            rw = w.at("selected_range")
            rng = get_mapping(item["selected_range"], rw)
            check_keys(rng, {"lower", "upper"}, rw)
            bounds = {k: get_number(rng, k, rw) for k in ("lower", "upper") if k in rng}
            if not bounds:
                raise rw.error("give lower, upper or both")
            out.append({"filter_id": filter_id, "selected_range": bounds})
    return out


def _qualifications(raw: Any, where: Where) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(get_list(raw, where)):
        w = where.at(i)
        item = get_mapping(item, w)
        check_keys(item, {"type", "comparator", "value", "values", "locales"}, w)
        kind = get_line(item, "type", w, max_len=64)
        known = (*MTURK_SYSTEM_QUALIFICATIONS, "masters")
        if kind not in known and not _QUAL_ID.match(kind):
            raise w.at("type").error(
                f"{kind!r} is neither one of {list(known)} nor a qualification type id"
            )
        comparator = get_line(item, "comparator", w, default="Exists")
        if comparator not in MTURK_COMPARATORS:
            raise w.at("comparator").error(
                f"{comparator!r} is not one of {list(MTURK_COMPARATORS)}"
            )
        entry: dict[str, Any] = {"type": kind, "comparator": comparator}
        if "value" in item:
            entry["values"] = [get_int(item, "value", w, default=0)]
        elif "values" in item:
            vw = w.at("values")
            entry["values"] = [
                get_int({"v": v}, "v", vw.at(j), default=0)
                for j, v in enumerate(get_list(item["values"], vw, min_len=1))
            ]
        if "locales" in item:
            lw = w.at("locales")
            locales = []
            for j, loc in enumerate(get_list(item["locales"], lw, min_len=1)):
                text = str(loc).strip()
                country, _, sub = text.partition("-")
                # MTurk's Locale takes two characters for each (botocore's model: min 2, max 2).
                if (
                    len(country) != 2
                    or not country.isalpha()
                    or (sub and (len(sub) != 2 or not sub.isalnum()))
                ):
                    raise lw.at(j).error(f"{text!r} is not a country code such as US or US-NY")
                locales.append(
                    {"Country": country.upper(), **({"Subdivision": sub.upper()} if sub else {})}
                )
            entry["locales"] = locales
        needs_value = comparator not in ("Exists", "DoesNotExist")
        if needs_value and "values" not in entry and "locales" not in entry:
            raise w.error(f"comparator {comparator} needs a value, values or locales")
        out.append(entry)
    return out


def validate_recruiter(
    raw: Any,
    where: Where,
    *,
    recruitment: Recruitment,
    payment: Payment,
    estimated_minutes: float,
) -> RecruiterSettings:
    """Validate a ``recruiter:`` block against the study's validated sections.

    Returns
    -------
    webapp.definition.RecruiterSettings
        Amounts in cents.

    Raises
    ------
    webapp.validation.StudyDefinitionError
        Located at the offending key.
    """
    raw = get_mapping(raw, where)
    reward_key = written_key(raw, "reward", "reward_usd", where)
    check_keys(raw, _KEYS | {reward_key}, where)
    platform = get_line(raw, "platform", where)
    if platform not in RECRUITERS:
        raise where.at("platform").error(f"{platform!r} is not one of {list(RECRUITERS)}")
    if platform not in recruitment.platforms:
        raise where.at("platform").error(
            f"{platform} is not in recruitment.platforms {list(recruitment.platforms)}"
        )
    places = get_int(raw, "places", where, default=0, minimum=1) if "places" in raw else None
    if places is None:
        raise where.at("places").error("is required (how many people to recruit)")
    reward = get_money(raw, reward_key, where, default=payment.base)
    if reward <= 0:
        raise where.at(reward_key).error("must be more than 0 (or set payment.base)")

    minutes = get_number(raw, "estimated_minutes", where, default=estimated_minutes, minimum=1)
    devices = [
        str(d)
        for d in get_list(
            raw.get("devices", list(PROLIFIC_DEVICES)), where.at("devices"), min_len=1
        )
    ]
    for i, d in enumerate(devices):
        if d not in PROLIFIC_DEVICES:
            raise where.at("devices").at(i).error(f"{d!r} is not one of {list(PROLIFIC_DEVICES)}")
    if platform == "mturk" and "devices" in raw:
        raise where.at("devices").error("MTurk has no device limits; only Prolific does")
    if platform == "mturk" and "eligibility" in raw:
        raise where.at("eligibility").error("eligibility is Prolific's; MTurk uses qualifications")
    if platform == "prolific" and "qualifications" in raw:
        raise where.at("qualifications").error(
            "qualifications are MTurk's; Prolific uses eligibility"
        )
    block = raw.get("block_screened_out", False)
    if not isinstance(block, bool):
        raise where.at("block_screened_out").error(f"expected true or false, got {block!r}")
    if block and platform != "mturk":
        raise where.at("block_screened_out").error(
            "is MTurk's (a qualification type); Prolific asks screened-out people to return"
        )
    return RecruiterSettings(
        platform=platform,
        places=places,
        reward_cents=round(reward * 100),
        estimated_minutes=int(round(minutes)),
        fee_rate=get_number(
            raw,
            "fee_rate",
            where,
            default=DEFAULT_PROLIFIC_FEE if platform == "prolific" else 0.2,
            minimum=0,
            maximum=2,
        ),
        devices=tuple(devices),
        eligibility=tuple(_eligibility(raw.get("eligibility", []), where.at("eligibility"))),
        qualifications=tuple(
            _qualifications(raw.get("qualifications", []), where.at("qualifications"))
        ),
        lifetime_hours=get_number(
            raw, "lifetime_hours", where, default=72.0, minimum=1, maximum=8760
        ),
        assignment_minutes=get_int(
            raw, "assignment_minutes", where, default=max(30, int(minutes) * 3), minimum=1
        ),
        keywords=get_line(raw, "keywords", where, default="survey, research", max_len=1000),
        block_screened_out=block,
    )
