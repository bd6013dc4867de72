"""The study YAML's recruiter: block: located errors for careless input, defaults otherwise."""

from __future__ import annotations

import pytest

from tests.webapp.recruit.conftest import SHORT_DEMO, study_with
from webapp.studydef import load_study_file
from webapp.validation import StudyDefinitionError


def load(tmp_path, block: str):
    return load_study_file(study_with(tmp_path, block))


P, M = "recruiter: {platform: prolific, places: 5", "recruiter: {platform: mturk, places: 5"
Q = M + ", qualifications: [{type: "


@pytest.mark.parametrize(
    ("block", "where", "reason"),
    [
        ("recruiter: {platform: upwork, places: 5}", "recruiter.platform", "not one of"),
        ("recruiter: {platform: prolific}", "recruiter.places", "is required"),
        ("recruiter: {platform: prolific, places: 0}", "recruiter.places", "at least 1"),
        ("recruiter: {platform: prolific, places: 5.5}", "recruiter.places", "integer"),
        (P + ", reward: -1}", "recruiter.reward", "at least 0"),
        (P + ", devices: [phone]}", "recruiter.devices[0]", "not one of"),
        (M + ", devices: [desktop]}", "recruiter.devices", "MTurk has no device"),
        (P + ", qualifications: []}", "recruiter.qualifications", "MTurk's"),
        (P + ", block_screened_out: true}", "recruiter.block_screened_out", "MTurk's"),
        (P + ", eligibility: [{filter_id: age}]}", "recruiter.eligibility[0]", "exactly one"),
        (Q + "nice_people}]}", "recruiter.qualifications[0].type", "neither"),
        (Q + "approval_rate, comparator: GreaterThan}]}", "recruiter.qualifications[0]", "needs a"),
        (
            Q + "locale, comparator: In, locales: [USA]}]}",
            "recruiter.qualifications[0].locales[0]",
            "country code",
        ),
        (P + ", plces: 3}", "recruiter", "unknown key"),
    ],
)
def test_bad_blocks_are_refused_where_they_are(tmp_path, block, where, reason):
    with pytest.raises(StudyDefinitionError) as info:
        load(tmp_path, "\n" + block + "\n")
    message = str(info.value)
    assert f": {where}:" in message and reason in message and "(line " in message


def test_platform_must_be_one_the_study_accepts(tmp_path):
    path = study_with(tmp_path, "\nrecruiter: {platform: mturk, places: 5}\n")
    path.write_text(path.read_text().replace("[prolific, mturk, link]", "[prolific]"))
    with pytest.raises(StudyDefinitionError, match="not in recruitment.platforms"):
        load_study_file(path)


def test_defaults_come_from_the_study(tmp_path):
    d = load(tmp_path, "\nrecruiter: {platform: prolific, places: 70}\n")
    r = d.recruiter
    assert (r.reward_cents, r.estimated_minutes) == (300, 12)  # payment.base, 12 min
    assert r.devices == ("desktop", "tablet", "mobile") and r.fee_rate == 1 / 3


def test_no_block_means_no_recruiter(tmp_path):
    from tests.webapp.conftest import demo_copy

    plain = load_study_file(demo_copy(tmp_path / "plain", **SHORT_DEMO))
    assert load(tmp_path, "").recruiter is None and load(tmp_path, "") == plain


def test_cli_without_a_recruiter_block(app, study, runner):
    result = runner.invoke(args=["recruit", "product-choice-demo", "plan"])
    assert result.exit_code == 1 and "no recruiter: block" in result.output
    result = runner.invoke(args=["recruit", "no-such-study", "plan"])
    assert result.exit_code == 1 and "no study" in result.output
