"""The framing judge reads its instruction before the text it labels (seed study, A.8)."""

from __future__ import annotations

from analysis.llm.templates import get_template


def test_framing_judge_states_the_instruction_before_the_text():
    import analysis.llm.tasks  # noqa: F401  (registers the task templates)

    [message] = get_template("judge-framing", "baseline").messages(text="THE TEXT ITSELF")
    content = message["content"]
    assert content.index("Positive, Negative, or Neutral") < content.index("THE TEXT ITSELF")
    assert content.rstrip().endswith("THE TEXT ITSELF")
