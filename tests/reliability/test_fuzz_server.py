"""Hypothesis-generated requests against the rollout server's endpoints (issue 7 §2).

The app runs in-process (httpx's ASGI transport, its lifespan entered by hand): no request
may get a 500 or hang, and each kind of bad input gets the 4xx PROTOCOL.md §2.6 gives it.
Generated bodies mix the real field names with arbitrary JSON, so most examples reach the
validators rather than stopping at "not an object".
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.types import RolloutStatus
from server_stub import (
    AgentWorkflow,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    LocalBackend,
    create_rollout_server,
)
from tests.reliability.counts import scaled

T = TypeVar("T")
REQUEST_TIMEOUT_SEC = 5.0
EXAMPLES = scaled(120, 1500)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
API_KEY = "fuzz-server-key-0123456789"


class Instant(AgentWorkflow[Any]):
    """Returns at once, whatever it was given: the fuzz is about the HTTP layer."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        return AgentWorkflowOutput(messages=[{"role": "assistant", "content": "ok"}])


class Harness:
    """One app, one event loop and one client for all the examples of a test."""

    def __init__(self, loop: asyncio.AbstractEventLoop, http: httpx.AsyncClient) -> None:
        self.loop = loop
        self.http = http

    def run(self, make: Callable[[], Awaitable[T]]) -> T:
        async def bounded() -> T:
            return await asyncio.wait_for(make(), REQUEST_TIMEOUT_SEC)  # never a hang

        return self.loop.run_until_complete(bounded())

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.run(lambda: self.http.request(method, path, **kwargs))


@contextmanager
def harness(**server: Any) -> Iterator[Harness]:
    server.setdefault("result_retention_sec", 1.0)
    app = create_rollout_server(
        backend=LocalBackend(workflow=Instant),
        configure_logging=False,
        result_wait_timeout_sec=0.05,
        polling_lease_timeout_sec=1.0,
        **server,
    )
    loop = asyncio.new_event_loop()
    lifespan = app.router.lifespan_context(app)
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://fuzz", timeout=REQUEST_TIMEOUT_SEC
    )
    loop.run_until_complete(lifespan.__aenter__())
    try:
        yield Harness(loop, http)
    finally:
        loop.run_until_complete(http.aclose())
        loop.run_until_complete(asyncio.wait_for(lifespan.__aexit__(None, None, None), 30))
        loop.close()


# -- strategies --------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
ids = st.text(min_size=0, max_size=12) | st.sampled_from(
    [".", "..", "a/b", "a\\b", "x\x00y", "ok-1"]
)
messages = st.lists(
    st.dictionaries(st.sampled_from(["role", "content", "x"]), json_values), max_size=3
)
timeouts = (
    st.none() | st.floats(allow_nan=False, allow_infinity=False) | st.integers() | json_values
)

ROLLOUT_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "rollout_id": ids | json_values,
    "initial_messages": messages | json_values,
    "chat_completions_url": st.text(max_size=20) | json_values,
    "llm_api_key": st.none() | st.text(max_size=10) | json_values,
    "label": st.none() | st.text(max_size=10) | json_values,
    "metadata": st.none()
    | st.dictionaries(st.text(max_size=6), json_values, max_size=3)
    | json_values,
    "grade": st.booleans() | json_values,
    "agent_timeout_sec": timeouts,
    "grader_timeout_sec": timeouts,
    "extra_fields": st.none() | json_values,
    "completion_callback_url": st.text(max_size=10),  # legacy: ignored
}


@st.composite
def rollout_bodies(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.sets(st.sampled_from(sorted(ROLLOUT_FIELDS))))
    return {key: draw(ROLLOUT_FIELDS[key]) for key in keys}


def valid(body: dict[str, Any]) -> bool:
    """Whether the body passes RolloutInitRequest (the server must then answer 202 or 409)."""
    from pydantic import ValidationError

    from core.types import RolloutInitRequest

    try:
        RolloutInitRequest.model_validate(body)
    except ValidationError:
        return False
    return True


def assert_json_4xx(response: httpx.Response, *statuses: int) -> Any:
    assert response.status_code in statuses, (response.status_code, response.text[:300])
    return response.json()


# -- POST /rollout -----------------------------------------------------------------------------


VALID_BODY = {"rollout_id": "fuzz-ok", "initial_messages": [], "chat_completions_url": "u"}


def test_generated_admission_bodies_get_202_409_or_422_never_500() -> None:
    admitted: dict[str, str] = {}
    seen: Counter[int] = Counter()
    with harness() as h:

        @FUZZ
        @given(body=rollout_bodies())
        @example(body=VALID_BODY)
        @example(body=VALID_BODY)  # the same id again: 409
        @example(body={**VALID_BODY, "rollout_id": "..", "llm_api_key": ""})
        def check(body: dict[str, Any]) -> None:
            response = h.request("POST", "/rollout", json=body)
            seen[response.status_code] += 1
            if response.status_code == 202:
                assert valid(body)
                answer = response.json()
                assert answer["rollout_id"] == body["rollout_id"]
                assert answer["status"] == "queued"
                admitted[answer["rollout_id"]] = answer["polling_lease_token"]
            elif response.status_code == 409:
                assert valid(body) and body["rollout_id"] in admitted
                assert response.json() == {"detail": "rollout_id is already registered"}
            else:
                detail = assert_json_4xx(response, 422)["detail"]
                assert not valid(body)
                assert isinstance(detail, list) and detail
                assert all({"type", "loc", "msg"} <= set(item) for item in detail)

        check()
        assert seen[202] and seen[409] and seen[422], seen
        # Whatever got in ran to an end; nothing is left spinning.
        for rollout_id, token in list(admitted.items())[:20]:
            response = h.request(
                "GET",
                f"/rollout/{quote(rollout_id, safe='')}/result",
                headers={"X-Osmosis-Rollout-Lease": token},
            )
            assert response.status_code in (200, 404)  # 404: retention removed it


@FUZZ
@given(raw=st.binary(max_size=200))
def test_bodies_that_are_not_json_objects_get_422(raw: bytes) -> None:
    with harness() as h:
        response = h.request(
            "POST", "/rollout", content=raw, headers={"Content-Type": "application/json"}
        )
    try:
        parsed = json.loads(raw)
    except ValueError:
        # Not JSON at all. FastAPI (as the official server) answers 422 json_invalid, or 400
        # "There was an error parsing the body" when the bytes cannot even be decoded (the
        # JSON decoder guesses UTF-16/32 from NUL bytes, for one).
        assert_json_4xx(response, 400, 422)
        return
    if isinstance(parsed, dict) and valid(parsed):
        assert response.status_code == 202
    else:
        assert_json_4xx(response, 422)


def test_hostile_json_shapes_are_refused_with_a_4xx() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    body = {
        "rollout_id": "r",
        "initial_messages": [],
        "chat_completions_url": "u",
    }
    cases = {
        "deep nesting": deep,
        "NaN timeout": json.dumps({**body, "agent_timeout_sec": float("nan")}).encode(),
        "Infinity timeout": json.dumps({**body, "grader_timeout_sec": float("inf")}).encode(),
        "overflowing number": json.dumps(body)[:-1].encode() + b', "agent_timeout_sec": 1e400}',
        "lone surrogate id": json.dumps({**body, "rollout_id": "\ud800"}).encode(),
        "not utf-8": b'{"rollout_id": "\xff\xfe"}',
        "empty": b"",
        "a huge prompt": json.dumps(
            {**body, "rollout_id": "big", "initial_messages": [{"content": "x" * 5_000_000}]}
        ).encode(),
    }
    with harness() as h:
        answers = {
            name: h.request(
                "POST", "/rollout", content=raw, headers={"Content-Type": "application/json"}
            )
            for name, raw in cases.items()
        }
    statuses = {name: response.status_code for name, response in answers.items()}
    assert statuses == {
        "deep nesting": 400,  # FastAPI: "There was an error parsing the body"
        "NaN timeout": 422,
        "Infinity timeout": 422,
        "overflowing number": 422,
        # A legal JSON string, refused: no answer naming it could be encoded (the official
        # server admits it, then fails its own 202 with a 500).
        "lone surrogate id": 422,
        "not utf-8": 400,
        "empty": 422,
        "a huge prompt": 202,
    }


# -- GET /rollout/{id}/result ------------------------------------------------------------------

header_values = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=0, max_size=60
)


def test_generated_result_requests_get_200_403_404_or_422() -> None:
    with harness(result_retention_sec=900.0) as h:  # "known" stays known for the whole test
        admitted = h.request(
            "POST",
            "/rollout",
            json={"rollout_id": "known", "initial_messages": [], "chat_completions_url": "u"},
        ).json()

        @FUZZ
        @given(
            rollout_id=st.sampled_from(["known"]) | ids.filter(bool),
            lease=st.none() | header_values,
        )
        def check(rollout_id: str, lease: str | None) -> None:
            headers = {} if lease is None else {"X-Osmosis-Rollout-Lease": lease}
            path = f"/rollout/{quote(rollout_id, safe='')}/result"
            response = h.request("GET", path, headers=headers)
            if "/" in rollout_id or rollout_id in (".", ".."):
                # Not one path segment: no result route matches at all.
                assert_json_4xx(response, 404, 405)
            elif not lease:
                detail = assert_json_4xx(response, 422)["detail"]
                assert detail[0]["loc"] == ["header", "X-Osmosis-Rollout-Lease"]
            elif rollout_id == "known":
                if lease == admitted["polling_lease_token"]:
                    assert response.status_code == 200
                    assert response.json()["status"] in {s.value for s in RolloutStatus}
                else:
                    assert assert_json_4xx(response, 403) == {"detail": "invalid polling lease"}
            else:
                assert assert_json_4xx(response, 404) == {"detail": "unknown rollout_id"}

        check()


# -- POST /rollout/cancel ----------------------------------------------------------------------

cancel_fields: dict[str, st.SearchStrategy[Any]] = {
    "ids": st.none() | st.lists(st.text(max_size=6), max_size=3) | json_values,
    "prefix": st.none() | st.text(max_size=4) | json_values,
    "all": st.booleans() | json_values,
}


@st.composite
def cancel_bodies(draw: st.DrawFn) -> Any:
    if draw(st.booleans()):
        return draw(json_values)
    keys = draw(st.sets(st.sampled_from(sorted(cancel_fields))))
    return {key: draw(cancel_fields[key]) for key in keys}


def test_generated_cancel_bodies_get_200_or_422() -> None:
    with harness() as h:

        @FUZZ
        @given(body=cancel_bodies())
        def check(body: Any) -> None:
            response = h.request("POST", "/rollout/cancel", json=body)
            if response.status_code == 200:
                dispositions = response.json()["dispositions"]
                assert isinstance(dispositions, dict)
                assert set(dispositions.values()) <= {
                    "not_found",
                    "cancelled_queued",
                    "cancelled_running",
                }
            else:
                assert_json_4xx(response, 422)

        check()


# -- auth, methods and paths -------------------------------------------------------------------


def test_every_request_without_the_exact_bearer_is_401_before_anything_else() -> None:
    with harness(api_key=API_KEY) as h:

        @FUZZ
        @given(
            method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]),
            path=st.sampled_from(["/health", "/rollout", "/rollout/x/result", "/rollout/cancel"])
            | st.text(alphabet="abc/._-%", max_size=12).map(lambda p: "/" + p.lstrip("/")),
            authorization=st.none() | header_values,
            body=st.none() | json_values,
        )
        def check(method: str, path: str, authorization: str | None, body: Any) -> None:
            headers = {} if authorization is None else {"Authorization": authorization}
            kwargs: dict[str, Any] = {"headers": headers}
            if body is not None and method not in ("GET", "OPTIONS"):
                kwargs["json"] = body
            response = h.request(method, path, **kwargs)
            if (authorization or "").strip() == f"Bearer {API_KEY}":
                assert response.status_code != 401
                assert response.status_code < 500, response.text[:200]
            else:
                assert assert_json_4xx(response, 401) == {"detail": "unauthorized"}

        check()


def test_unknown_methods_and_paths_get_404_or_405() -> None:
    with harness() as h:

        @FUZZ
        @given(
            method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]),
            path=st.text(alphabet="abcr/._-%0", max_size=16).map(lambda p: "/" + p.lstrip("/")),
        )
        def check(method: str, path: str) -> None:
            response = h.request(method, path)
            assert response.status_code < 500, (method, path, response.text[:200])

        check()
