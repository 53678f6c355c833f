"""The `ask_user` tool: the model asks the user a question and waits for the answer.

A question is a call that waits like a permission request (stored, answered through whichever
door and process the user is at, in every approval mode), whose request shows `QuestionDetails`
and whose options are the choices, a free answer and `cancel`. The answer the user gives is what
the call returns to the model; a dismissed question returns that it was not answered, and the
turn goes on."""

from __future__ import annotations

from typing import Any

from devagent.agent.events import ANSWER_OPTION, QuestionDetails, ToolErrorType, ToolKind
from devagent.agent.tools._util import parameter, parameters_schema, str_arg
from devagent.agent.tools.base import Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure

MAX_CHOICES = 10
MAX_CHOICE_CHARS = 200
MAX_QUESTION_CHARS = 4000


def question_of(args: dict[str, Any]) -> QuestionDetails:
    """The question a call asks, its arguments checked (a ToolFailure says what is wrong)."""
    question = str_arg(args, "question").strip()
    if len(question) > MAX_QUESTION_CHARS:
        raise ToolFailure(
            f"the question is longer than {MAX_QUESTION_CHARS} characters", ToolErrorType.INVALID_ARGUMENTS
        )
    raw = args.get("choices") or []
    if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
        raise ToolFailure("the argument 'choices' must be a list of strings", ToolErrorType.INVALID_ARGUMENTS)
    choices = [" ".join(c.split()) for c in raw]
    if any(not c for c in choices):
        raise ToolFailure("a choice must not be empty", ToolErrorType.INVALID_ARGUMENTS)
    if len(choices) > MAX_CHOICES:
        raise ToolFailure(f"at most {MAX_CHOICES} choices may be offered", ToolErrorType.INVALID_ARGUMENTS)
    if any(len(c) > MAX_CHOICE_CHARS for c in choices):
        raise ToolFailure(
            f"a choice is longer than {MAX_CHOICE_CHARS} characters", ToolErrorType.INVALID_ARGUMENTS
        )
    if len({c.casefold() for c in choices}) != len(choices):
        raise ToolFailure("the choices must differ from each other", ToolErrorType.INVALID_ARGUMENTS)
    free = args.get("allow_free_text", True)
    if not isinstance(free, bool):
        raise ToolFailure(
            "the argument 'allow_free_text' must be true or false", ToolErrorType.INVALID_ARGUMENTS
        )
    if len(choices) == 1 and not free:
        raise ToolFailure(
            "offer at least two choices, or allow a free answer", ToolErrorType.INVALID_ARGUMENTS
        )
    # Without choices, only a free answer can answer it.
    return QuestionDetails(question, choices, free or not choices)


class AskUser(Tool):
    name = "ask_user"
    description = (
        "Ask the user a question and wait for the answer. Use it when you cannot go on without "
        "the user's decision or information you cannot find yourself (which of two designs, a "
        "value only they know); not for things you can check with the other tools, and not to "
        "ask permission (edits and commands ask for themselves). Offer `choices` when the answer "
        "is one of a few options; the user may still answer in their own words unless "
        "`allow_free_text` is false. The result is the user's answer, or that they dismissed the "
        "question (then go on with your best judgement, or stop and say what you need)."
    )
    parameters = parameters_schema(
        ["question"],
        question=parameter("string", "The question, complete and self-contained."),
        choices=parameter(
            "array",
            f"Up to {MAX_CHOICES} short answers to choose from, in the order to show them.",
            items={"type": "string"},
        ),
        allow_free_text=parameter(
            "boolean", "Whether the user may answer in their own words besides the choices (default true)."
        ),
    )
    kind = ToolKind.QUESTION

    def describe(self, args: dict[str, Any]) -> str:
        question = args.get("question") if isinstance(args, dict) else None
        if not isinstance(question, str) or not question.strip():
            return "Ask the user a question"
        text = " ".join(question.split())
        return f"Ask the user: {text if len(text) <= 120 else text[:117] + '...'}"

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> QuestionDetails:
        return question_of(args)

    def answer_content(self, args: dict[str, Any], option: str, new_content: str | None) -> str | None:
        """The answer the call runs with: the chosen choice's text, or the free answer."""
        if option == ANSWER_OPTION:
            return (new_content or "").strip()
        return question_of(args).choice_of(option)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        answer = ctx.new_content
        if answer is None or not answer.strip():
            raise ToolFailure("the question was not answered", ToolErrorType.NOT_ANSWERED)
        return ToolResult(text=f"The user answered: {answer}", data={"answer": answer})
