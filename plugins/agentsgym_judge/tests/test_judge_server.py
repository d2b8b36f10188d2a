"""A Judge against a loopback OpenAI-compatible server: scores, retries, failures that
raise RewardUnavailableError (never a 0), the in-flight bound and the cache."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import agentsgym
from agentsgym.errors import RewardUnavailableError
from agentsgym_judge import SCORE_TEMPLATE, Judge, JudgeConfig, number
from agentsgym_serve.model_server import ScriptedPolicy
from judge_fixtures import GUARD, JUDGE_MODEL, GatedPolicy, judge_settings, serve, wait_until

QUESTION = {"question": "What is 7 + 5?", "reference": "12"}


def test_a_verdict_has_the_score_and_what_the_judge_was_asked_and_answered(
    judge_server: Any,
) -> None:
    judge = Judge(judge_settings(judge_server))
    right = judge.score(**QUESTION, answer="It is 12.")
    wrong = judge.score(**QUESTION, answer="13")
    assert (right.score, right.reply, wrong.score, wrong.reply) == (1.0, "yes", 0.0, "no")
    assert "What is 7 + 5?" in right.prompt and "It is 12." in right.prompt
    assert right.record() == {
        "score": 1.0,
        "prompt": right.prompt,
        "reply": "yes",
        "model": JUDGE_MODEL,
        "reused": False,
    }
    sent = judge_server.requests[-1]
    assert sent["model"] == JUDGE_MODEL and sent["temperature"] == 0.0
    assert "logprobs" not in sent  # a judge asks for text only


def test_a_template_and_parser_of_the_authors_choice() -> None:
    with serve(ScriptedPolicy(["Score: 8"])) as server:
        judge = Judge(judge_settings(server), template=SCORE_TEMPLATE, parser=number(0, 10))
        assert judge.score(**QUESTION, answer="12").score == pytest.approx(0.8)


def test_the_same_prompt_is_asked_once(judge_server: Any) -> None:
    judge = Judge(judge_settings(judge_server))
    before = len(judge_server.requests)
    first = judge.score(**QUESTION, answer="12, the same")
    again = judge.score(**QUESTION, answer="12, the same")
    assert (first.reused, again.reused, again.score) == (False, True, first.score)
    assert len(judge_server.requests) == before + 1
    assert (judge.stats.asked, judge.stats.reused) == (1, 1)


def test_a_prompt_asked_while_its_request_is_in_flight_shares_it(gated: Any) -> None:
    server, policy = gated
    judge = Judge(judge_settings(server))

    async def ask_four_times() -> list[Any]:
        return await asyncio.gather(*(judge.ascore(**QUESTION, answer="12") for _ in range(4)))

    verdicts: list[Any] = []
    thread = threading.Thread(target=lambda: verdicts.extend(asyncio.run(ask_four_times())))
    thread.start()
    wait_until(lambda: policy.arrived == 1, "the first request")
    policy.gate.set()
    thread.join(GUARD)
    assert [v.reused for v in verdicts].count(False) == 1
    assert {v.score for v in verdicts} == {1.0}
    assert policy.arrived == 1 and len(server.requests) == 1


def test_never_more_than_max_concurrency_requests_in_flight(gated: Any) -> None:
    server, policy = gated
    judge = Judge(judge_settings(server, max_concurrency=3))
    answers = [str(n) for n in range(10)]  # ten prompts: no two share a request

    async def judge_all() -> list[Any]:
        return await asyncio.gather(*(judge.ascore(**QUESTION, answer=a) for a in answers))

    verdicts: list[Any] = []
    thread = threading.Thread(target=lambda: verdicts.extend(asyncio.run(judge_all())))
    thread.start()
    # Every judgement has reached the judge: three at the server, seven queued for a slot.
    wait_until(lambda: judge.stats.waiting == 7 and policy.arrived == 3, "3 sent and 7 queued")
    assert server.in_flight == 3 and judge.stats.in_flight == 3
    policy.gate.set()
    thread.join(GUARD)
    assert len(verdicts) == 10 and policy.arrived == 10
    assert server.max_in_flight == 3
    assert [v.score for v in verdicts] == [1.0 if a == "12" else 0.0 for a in answers]


def test_the_bound_holds_across_event_loops(gated: Any) -> None:
    """Plain hooks judge through agentsgym's background loop, async hooks on the
    runner's: one judge, one bound."""
    server, policy = gated
    judge = Judge(judge_settings(server, max_concurrency=2))
    threads = [
        threading.Thread(target=lambda n=n: judge.score(**QUESTION, answer=f"sync {n}"))
        for n in range(3)
    ] + [
        threading.Thread(target=lambda n=n: asyncio.run(judge.ascore(**QUESTION, answer=f"{n}")))
        for n in range(3)
    ]
    for thread in threads:
        thread.start()
    wait_until(lambda: judge.stats.waiting == 4 and policy.arrived == 2, "2 sent and 4 queued")
    policy.gate.set()
    for thread in threads:
        thread.join(GUARD)
    assert policy.arrived == 6 and server.max_in_flight == 2


def test_a_server_error_is_retried() -> None:
    with serve(ScriptedPolicy(["yes"])) as server:
        judge = Judge(judge_settings(server, max_retries=2))
        server.fail_next(2, 500)
        assert judge.score(**QUESTION, answer="12").score == 1.0
        assert len(server.requests) == 3


def test_a_server_that_keeps_failing_makes_the_reward_unavailable() -> None:
    with serve(ScriptedPolicy(["yes"])) as server:
        judge = Judge(judge_settings(server, max_retries=2))
        server.fail_next(3, 500)
        with pytest.raises(RewardUnavailableError, match=r"HTTP 500 \(3 attempts\)"):
            judge.score(**QUESTION, answer="12")
        assert judge.stats.failed == 1
        # a failure is not kept: the next judgement of the same prompt asks again
        assert judge.score(**QUESTION, answer="12").score == 1.0


def test_a_hanging_server_times_out_into_an_unavailable_reward(gated: Any) -> None:
    server, policy = gated
    judge = Judge(judge_settings(server, timeout_seconds=0.2, max_retries=1))
    with pytest.raises(RewardUnavailableError, match=r"did not answer within 0.2s \(2 attempts\)"):
        judge.score(**QUESTION, answer="12")
    assert policy.arrived == 2


def test_a_judgement_past_its_deadline_is_unavailable(gated: Any) -> None:
    server, _policy = gated
    settings = judge_settings(server, timeout_seconds=0.2, deadline_seconds=0.3, max_retries=50)
    judge = Judge(settings)
    with pytest.raises(RewardUnavailableError, match=r"no verdict within deadline_seconds=0.3"):
        judge.score(**QUESTION, answer="12")
    assert judge.stats.in_flight == 0  # the request given up left its slot


@pytest.mark.parametrize("reply", ["I would rather not say.", ""])
def test_an_unreadable_reply_is_unavailable_and_not_kept(reply: str) -> None:
    with serve(ScriptedPolicy([reply])) as server:
        judge = Judge(judge_settings(server))
        for _ in range(2):
            with pytest.raises(RewardUnavailableError, match="neither yes nor no") as raised:
                judge.score(**QUESTION, answer="12")
        assert repr(reply) in str(raised.value)
        assert len(server.requests) == 2 and judge.stats.failed == 2


def test_an_unreachable_server_is_unavailable() -> None:
    with serve(ScriptedPolicy(["yes"])) as server:
        url = server.base_url
    judge = Judge(JudgeConfig(base_url=url, model=JUDGE_MODEL, max_retries=0))
    with pytest.raises(RewardUnavailableError, match="cannot reach"):
        judge.score(**QUESTION, answer="12")


def test_an_api_key_comes_from_the_variable_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with model_server_with_key("s3cret") as server:
        monkeypatch.setenv("MY_JUDGE_KEY", "s3cret")
        judge = Judge(judge_settings(server, api_key_env="MY_JUDGE_KEY"))
        assert judge.score(**QUESTION, answer="12").score == 1.0
    monkeypatch.delenv("MY_JUDGE_KEY")
    with pytest.raises(agentsgym.errors.AgentError, match=r"\$MY_JUDGE_KEY, which is not set"):
        Judge(JudgeConfig(api_key_env="MY_JUDGE_KEY"))


def model_server_with_key(key: str) -> Any:
    from agentsgym_serve.model_server import OpenAICompatServer

    return OpenAICompatServer(ScriptedPolicy(["yes"]), models=[JUDGE_MODEL], api_key=key)


def test_a_deadline_shorter_than_one_attempt_is_refused() -> None:
    with pytest.raises(ValueError, match="leaves no room for one request"):
        JudgeConfig(timeout_seconds=30, deadline_seconds=10)


def test_gated_policy_counts_what_arrives() -> None:
    """The counting fake server itself: it holds requests until its gate opens."""
    policy = GatedPolicy(lambda messages: "yes")
    policy.gate.set()
    assert policy.chat([{"role": "user", "content": "q"}], {}).text == "yes"
    assert policy.arrived == 1
