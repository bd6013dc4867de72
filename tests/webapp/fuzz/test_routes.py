"""Every route of the URL map (participant, researcher, JSON) with random path arguments,
query strings and form bodies: never a 500, never a stack trace."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..security.conftest import build, login, rules
from .test_forms import FIELD_NAMES, VALUE, check_response

SEGMENT = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="/?#%"), min_size=1, max_size=40
)


@pytest.mark.slow
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    which=st.integers(0, 10**6),
    segment=st.one_of(SEGMENT, st.just("product-choice-demo")),
    form=st.dictionaries(FIELD_NAMES, VALUE, max_size=5),
    logged_in=st.booleans(),
)
def test_any_route_with_any_arguments_never_fails_with_a_500(
    app, study, which, segment, form, logged_in
):
    all_rules = sorted(rules(app), key=lambda r: (r.rule, r.endpoint))
    rule = all_rules[which % len(all_rules)]
    client = app.test_client()
    if logged_in:
        login(app, client, "fuzz-admin", "pw-fuzz-123")
    url = build(app, rule, **{a: segment for a in rule.arguments})
    for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
        if method == "GET":
            resp = client.get(url, query_string=form)
        else:
            resp = client.open(url, method=method, data=form)
        text = resp.get_data(as_text=True)
        if resp.mimetype == "application/json":
            assert resp.status_code < 500 and "Traceback" not in text
        elif resp.mimetype == "text/html":
            check_response(resp.status_code, text)
        else:
            assert resp.status_code < 500
