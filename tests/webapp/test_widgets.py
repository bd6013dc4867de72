"""The participant pages' widgets write exactly WTForms' markup (webapp/tasks/widgets.py).

The reference is WTForms' own ``html_params``; the property test feeds both the names a page
uses (``class_``, ``data_``/``aria_`` names, booleans) and hostile values (quotes, markup,
``Markup`` that must not be escaped twice, numbers, ``None``).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import Markup
from wtforms.widgets.core import html_params as wtforms_html_params

from webapp.tasks.base import PageForm
from webapp.tasks.widgets import RadioField, StringField, html_params

NAMES = st.sampled_from(
    [
        "id",
        "name",
        "value",
        "class_",
        "for_",
        "data_rt",
        "aria_invalid",
        "aria_describedby",
        "checked",
        "required",
        "maxlength",
        "inputmode",
        "autocomplete",
        "type",
        "x_y_",
    ]
)
VALUES = st.one_of(
    st.booleans(),
    st.none(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(),
    st.text(alphabet="<>&\"' =a").map(Markup),
)


# The machine is shared and noisy: generation may be slow; the examples are small.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(NAMES, VALUES, max_size=8))
def test_html_params_writes_what_wtforms_writes(attrs):
    ours = html_params(**attrs)
    assert ours == wtforms_html_params(**attrs)
    assert isinstance(ours, Markup)


def test_a_value_cannot_break_out_of_its_attribute():
    out = html_params(value='"><script>alert(1)</script>', data_x=Markup('a"b'))
    assert out == 'data-x="a&quot;b" value="&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"'


def test_the_fields_render_the_same_inputs_as_wtforms_fields(app):
    import wtforms

    def form(radio, string):
        class _Form(PageForm):
            pick = radio("Pick", choices=["a", 'b"<'])
            text = string("Text", render_kw={"maxlength": 12})

        return _Form(formdata=None, meta={"csrf": False}, data={"pick": "a", "text": '<"x">'})

    with app.test_request_context("/"):
        ours = form(RadioField, StringField)
        theirs = form(wtforms.RadioField, wtforms.StringField)
        assert [str(o(aria_invalid="true")) for o in ours.pick] == [
            str(o(aria_invalid="true")) for o in theirs.pick
        ]
        assert str(ours.text(inputmode="decimal")) == str(theirs.text(inputmode="decimal"))
        assert 'value="&lt;&#34;x&#34;&gt;"' in str(ours.text())  # escaped once, as WTForms
