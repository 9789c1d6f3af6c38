"""Questions through stdin (acp_kernel.frontends.ask): the dialogs with scripted
answers, and the runner that stops waiting when a question is answered elsewhere."""

from __future__ import annotations

import asyncio
import threading

import pytest

from acp_kernel.frontends.ask import (
    RETRIES,
    Abandoned,
    StdinQuestions,
    form_dialog,
    permission_dialog,
    pick_option,
)

from .helpers import elicitation_prompt, permission_prompt

IMG = "<img src=x onerror=alert(1)>"


class Answers:
    """An ``input`` that plays back answers and records the prompts."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise EOFError
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


async def test_permission_by_number_shows_the_real_command_and_numbered_options():
    prompt = permission_prompt(title="Tidy up")
    ask = Answers("2")
    result = permission_dialog(prompt, ask)
    assert result.option_id == "approve_for_session"
    question = ask.prompts[0]
    assert "Tidy up" in question and "command: rm -rf build" in question
    assert "1. Allow once" in question and "2. Always allow" in question and "3. Reject" in question


@pytest.mark.parametrize("answer", ["", "   ", EOFError(), "\x04"])
async def test_empty_answer_or_end_of_input_rejects(answer):
    assert permission_dialog(permission_prompt(), Answers(answer)).option_id is None


async def test_invalid_answers_are_asked_again_a_bounded_number_of_times():
    ask = Answers("9", "maybe", "Reject")
    assert permission_dialog(permission_prompt(), ask).option_id == "abort"
    assert len(ask.prompts) == 3 and "is not one of the options" in ask.prompts[1]
    ask = Answers(*["nope"] * 20)
    assert permission_dialog(permission_prompt(), ask).option_id is None
    assert len(ask.prompts) == RETRIES + 1


def test_pick_option_by_number_or_kind_words_never_by_the_agents_name_or_id():
    options = [{"optionId": "reject", "name": "Reject", "kind": "allow_once"},
               {"optionId": "allow", "name": "Allow", "kind": "reject_always"},
               {"optionId": "r", "name": "No", "kind": "reject_once"}]
    assert pick_option(options, "1") == "reject" and pick_option(options, " 3 ") == "r"
    assert pick_option(options, "allow once") == "reject"  # the option of kind allow_once
    assert pick_option(options, "Reject") == "r"  # kind reject_once, not the one *named* Reject
    assert pick_option(options, "always  reject") == "allow"
    assert pick_option(options, "allow") == "reject" and pick_option(options, "r") is None  # ids are not answers
    assert pick_option(options, "0") is None and pick_option(options, "4") is None


async def test_hostile_title_and_command_are_cleaned_for_the_terminal():
    from acp.schema import RequestPermissionRequest

    prompt = permission_prompt(title=f"Run \x1b[2J{IMG}\nfake: line")
    prompt.request = RequestPermissionRequest.model_validate({
        "sessionId": "s1", "options": prompt.options,
        "toolCall": {"toolCallId": "t1", "rawInput": {"command": "echo `a\nb`", "path": "/tmp/evil\npath"}},
    })
    ask = Answers("")
    permission_dialog(prompt, ask)
    q = ask.prompts[0]
    assert "\x1b" not in q
    assert IMG in q  # text, shown as is: a terminal does not render HTML
    assert "\nfake: line" not in q  # a newline in the title cannot start a line of ours
    assert "    | /tmp/evil" in q and "    | path" in q  # multi-line values marked, line by line


async def test_a_form_by_lines_with_retries():
    prompt = elicitation_prompt()
    ask = Answers("y", "x", "my project", "0", "4", "", "y", "2", "1,3")
    outcome = form_dialog(prompt, ask)
    assert outcome == {"action": "accept", "content": {
        "name": "my project", "count": 4, "public": True, "license": "Apache-2.0", "tags": ["a", "c"]}}
    assert any("needs at least 2 characters" in p for p in ask.prompts)
    assert any("must be at least 1" in p for p in ask.prompts)


@pytest.mark.parametrize("answers,action", [(["n"], "decline"), ([""], "decline"), ([EOFError()], "cancel"),
                                            (["y", EOFError()], "cancel"), (["y"] + ["x"] * 10, "decline")])
async def test_a_form_declined_or_cancelled(answers, action):
    assert form_dialog(elicitation_prompt(), Answers(*answers))["action"] == action


async def test_the_runner_answers_the_prompt():
    prompt = permission_prompt()
    questions = StdinQuestions.from_input(Answers("1"))
    questions(prompt)
    assert await asyncio.wait_for(prompt.future, 5) == "approve"


async def test_the_runner_asks_one_question_at_a_time_and_forms_too():
    first, second = permission_prompt(), elicitation_prompt()
    order = []

    def read(text, stop):
        order.append(text.splitlines()[0])
        return {0: "3", 1: "n"}[len(order) - 1]

    questions = StdinQuestions(read)
    questions(first)
    questions(second)
    await questions.wait()
    assert first.future.result() == "abort" and second.future.result() == {"action": "decline"}
    assert len(order) == 2


async def test_a_question_answered_elsewhere_stops_waiting():
    prompt = permission_prompt()
    waiting = threading.Event()
    stopped = threading.Event()

    def read(text, stop):
        waiting.set()
        if stop.wait(10):
            stopped.set()
            raise Abandoned
        return "1"

    questions = StdinQuestions(read)
    questions(prompt)
    await asyncio.wait_for(asyncio.to_thread(waiting.wait, 5), 6)
    prompt.cancel()  # the turn was cancelled
    await questions.wait()
    assert await asyncio.wait_for(asyncio.to_thread(stopped.wait, 5), 6)
    assert prompt.future.result() is None


async def test_a_broken_reader_cancels_instead_of_leaving_the_agent_waiting():
    prompt = permission_prompt()

    def read(text, stop):
        raise RuntimeError("the frontend went away")

    questions = StdinQuestions(read)
    questions(prompt)
    await questions.wait()
    assert prompt.future.result() is None
