"""WildFrame's reframing prompt is one-shot: an example statement and its reframing, of the kind
the paper shows (a real-world statement kept verbatim, an opposite-sentiment prefix or suffix)."""

from __future__ import annotations

import pytest

from analysis.llm.templates import get_template


@pytest.mark.parametrize("base", ["positive", "negative"])
@pytest.mark.parametrize("position", ["prefix", "suffix"])
def test_every_reframing_prompt_carries_one_matching_example(base, position):
    import analysis.llm.tasks  # noqa: F401  (registers the task templates)

    tpl = get_template("reframe", "wildframe")
    shot = tpl.shots[f"{base}-{position}"]
    statement, answer = shot["statement"], shot["answer"]
    # The example keeps its statement word for word and frames it on the side it names.
    core = statement[1:].rstrip(".")  # a prefix lower-cases the first letter
    assert core in answer and answer != statement
    if position == "prefix":
        assert answer.endswith(statement[1:])
    else:
        assert answer.startswith(statement.rstrip("."))
    [message] = tpl.messages(
        text="THE STATEMENT", base_sentiment=base, target_sentiment="x", frame_position=position,
        shot_statement=statement, shot_answer=answer,
    )  # fmt: skip
    content = message["content"]
    assert content.count("Example statement:") == 1
    assert content.index(answer) < content.index("THE STATEMENT")
