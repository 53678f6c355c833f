"""A question the model asks (`ask_user`) in MCP's terms: an elicitation form whose fields are an
enum of the choices and a text field for the user's own words, the form's answer as the core's
decision, and the words the host's model sends with `devagent_continue` read as the answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from devagent.agent.api import Decision, QuestionDetails, ToolCall, how_to_answer, question_words


def form(q: QuestionDetails) -> type[BaseModel]:
    """The elicitation's schema for a question (flat, primitive fields, as MCP requires): `choice`
    among the choices and `answer` in the user's words, each required when it is the only way to
    answer."""
    fields: dict[str, Any] = {}
    if q.choices:
        choice: Any = Literal[tuple(q.choices)]  # type: ignore[valid-type]
        title = "Choose"
        if q.allow_free_text:
            fields["choice"] = (choice | None, Field(default=None, title=title))
        else:
            fields["choice"] = (choice, Field(title=title))
    if q.allow_free_text:
        if q.choices:
            fields["answer"] = (str, Field(default="", title="Or answer in your own words"))
        else:
            fields["answer"] = (str, Field(title="Your answer"))
    model: type[BaseModel] = create_model("Question", **fields)
    return model


def message(q: QuestionDetails) -> str:
    return f"devagent asks: {q.question}"


def decision(call: ToolCall, data: BaseModel | None) -> Decision:
    """The core's decision from an accepted form (None: declined): the words typed, else the
    choice made; an empty form dismisses the question like a decline."""
    q = call.question
    assert q is not None
    given = data.model_dump() if data is not None else {}
    for key in ("answer", "choice"):
        value = given.get(key)
        got = q.answer_for(value) if isinstance(value, str) else None
        if got is not None:
            return Decision(call.id, got[0], new_content=got[1])
    return Decision(call.id, "cancel")


def typed(call: ToolCall, text: str) -> Decision | None:
    """The host's answer through `devagent_continue`: a choice (its number or text) or the user's
    words where they are taken; None when it answers nothing."""
    q = call.question
    assert q is not None
    got = q.answer_for(text)
    return Decision(call.id, got[0], new_content=got[1]) if got is not None else None


def asking(q: QuestionDetails) -> str:
    """The question in the result the host's model reads, with how to answer it."""
    return f"devagent asks the user:\n{question_words(q)}\n{how_to_answer(q)}"
