"""What a run starts before its first rollout: the model gateway, the ownership-event
receiver and the rollout servers (EVAL.md §4–§6), each logged as it comes up.

`RunServices.start` opens them on the run's exit stack, so they stop with the run in the
right order: the model's preflight call goes out while the gateway binds and the servers
start or are reached, and its failure is the one reported. Every key the start-up learns (the
provider's, the gateway's bearer, the demo server's own) is handed to the session's `mask`
before it could appear anywhere.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace

import httpx

from core.board import RolloutBoard
from core.eval.errors import InputError
from core.eval.events.ownership import OwnershipEvent
from core.eval.events.receiver import EventReceiver, EventReceiverError
from core.eval.gateway.errors import GatewayError
from core.eval.gateway.model_gateway import ModelGateway
from core.eval.gateway.upstream_choice import opened_upstream
from core.eval.gateway.upstreams import ChatUpstream, ambient_secret_values, preflight
from core.eval.plan.prepare import EvalPlan
from core.eval.results.calls import CallLog, ModelCall
from core.eval.results.durable import make_folders
from core.eval.results.folder import RunFolder
from core.eval.results.logs import RunLog
from core.eval.servers.directory import ServerDirectory
from core.eval.servers.embedded import demo_rollout_server
from core.eval.servers.fd_budget import descriptor_budget
from core.eval.servers.launcher import DEPS_STEP, OUTPUT_STEP, launched_rollout_server
from core.eval.servers.pool import ServerPool
from core.eval.stopped_together import StoppedTogether
from core.serving.loopback import HTTP_LIMITS
from core.task_end import cancel_and_wait
from core.transport import AiohttpTransport
from core.types import OTLP_ENDPOINT_ENV, PREVIEW_ROOT_ENV

# The most of a child's latest output line kept for the front ends (the whole is in logs.txt).
LATEST_LINE_CHARS = 200


@dataclass(frozen=True)
class StartupStep:
    """What the start-up is doing now, for the front ends while nothing else moves: the step
    ("syncing rollout dependencies (multiply)") and the latest line of its output, if any."""

    doing: str
    latest: str | None = None


class RunServices:
    """The services of one run's session, started once by `start`."""

    def __init__(
        self,
        plan: EvalPlan,
        board: RolloutBoard,
        log: RunLog,
        calls: CallLog,
        *,
        redact: Callable[[str], str],
        mask: Callable[[list[str]], None],
        notice: Callable[[str], None],
        tell: Callable[[str], None],
        on_step: Callable[[str], None] | None = None,
        on_call_end: Callable[[], None] | None = None,
    ) -> None:
        """`redact` masks what the session knows to be secret; `mask` adds keys to it;
        `notice` logs a problem and tells the front end, `tell` only tells it; `on_step`
        hears of each start-up step as it begins (redacted); `on_call_end` of each model
        call's end, once the board counted it (the spend changed: the budget looks)."""
        self.plan = plan
        self._board = board
        self._log = log
        self._calls = calls
        self._redact = redact
        self._mask = mask
        self._notice = notice
        self._tell = tell
        #: The servers' bearer: the user's, or one of the run's own for the demo's server.
        self.server_api_key = plan.request.server_api_key
        #: The file descriptors the run may use; the demo's rollout server runs in a process
        #: of its own: only the model may be here.
        self.descriptors = descriptor_budget(model_in_process=plan.upstream.kind == "stub")
        self._on_step = on_step or (lambda _message: None)
        self._on_call_end = on_call_end or (lambda: None)
        self.gateway: ModelGateway | None = None
        self.pool: ServerPool | None = None
        #: Where the servers given by URL are (None: the run launched its own).
        self.directory: ServerDirectory | None = None
        #: What points a server's feeds at this run (`_feeds`), once the receiver listens.
        self.feeds: dict[str, str] = {}
        #: The start-up step in progress; None before the first and once the servers are up.
        self.step: StartupStep | None = None

    def _stage(self, message: str, *, step: str = "run") -> None:
        """A start-up step begins: in logs.txt under `step`, and told to the front end."""
        self._log.write(message, step=step)
        self.step = StartupStep(self._redact(message))
        self._on_step(self.step.doing)

    def _launch_log(self, step: str, line: str) -> None:
        """A line of the launch: in logs.txt; the children's output is also the step's latest
        line (cut: a long line is in the log whole)."""
        self._log.write(line, step=step)
        current, text = self.step, line.strip()
        if current is not None and text and step in (DEPS_STEP, OUTPUT_STEP):
            self.step = StartupStep(current.doing, self._redact(text)[:LATEST_LINE_CHARS])

    async def start(
        self, stack: AsyncExitStack, folder: RunFolder
    ) -> tuple[ModelGateway, ServerPool]:
        """Start the model gateway and start or reach the servers while the model's preflight
        call is out; the gateway and the pool, every server probed once, once it passed."""
        # For starting a launched server (its health reads bound themselves); the pool's
        # clients make their own connections.
        http = await stack.enter_async_context(
            httpx.AsyncClient(transport=AiohttpTransport(), timeout=httpx.Timeout(30.0, read=None))
        )
        # Before the gateway is started, so that it closes after the gateway has stopped.
        upstream, forwarded = await stack.enter_async_context(
            opened_upstream(self.plan.upstream, api_key=self.plan.request.llm_api_key)
        )
        # Stopped after the servers: an official server's last events are sent as it stops.
        events = await self._start_event_receiver(stack)
        started = await stack.enter_async_context(StoppedTogether())
        # The provider keys (as the environment holds them now) are masked everywhere.
        self._mask([*upstream.secrets, *ambient_secret_values()])
        # A remote model's preflight takes as long as a call; uv sync and a server's start
        # take seconds too. Nothing is sent to a server before the preflight passed, and its
        # failure is the one reported, whatever the launch did meanwhile.
        checked = asyncio.ensure_future(self._preflight(upstream))
        launch: asyncio.Future[tuple[str, ...]] | None = None
        try:
            self._stage("starting the model gateway", step="listener")
            gateway = await self._start_gateway(started, upstream, forwarded)
            self.feeds = self._feeds(events, folder)
            launch = asyncio.ensure_future(self._servers(started, folder, http, self.feeds))
            await checked
            urls = await launch
        finally:
            # Whichever is still going once the other failed (an error of the one that ended
            # second is not the one the run reports).
            for task in (checked, launch):
                if task is not None:
                    await cancel_and_wait(task)
        self.gateway = gateway
        pool = ServerPool.connect(
            list(urls),
            api_key=self.server_api_key,
            # The pool logs its own events; the front end is told as well.
            on_event=lambda slot, event: self._tell(f"server {slot.url} {event}"),
            directory=self.directory,
        )
        stack.push_async_callback(pool.aclose)
        # Shown once each server's state is known: before its first /health answer a server
        # that never answers would read as up.
        self._stage(f"reading /health of {', '.join(urls)}")
        await pool.probe_all()
        self.pool = pool
        self.step = None  # the servers are there to show
        return gateway, pool

    async def _start_event_receiver(self, stack: AsyncExitStack) -> EventReceiver:
        """The receiver of the servers' ownership events (EVAL.md §6): each goes to the
        board, which merges it with what the polls see."""
        board, log = self._board, self._log

        def received(event: OwnershipEvent) -> None:
            board.server_mark(event.rollout_id, event.mark())
            record = board.records.get(event.rollout_id)
            if self.pool is not None and record is not None:
                self.pool.heard_from(record.server)

        port = self.plan.request.events_port
        receiver = EventReceiver(received, port=port or 0)
        try:
            await stack.enter_async_context(receiver)
        except EventReceiverError as exc:
            if port is None:
                raise
            raise InputError.single("--events-port", str(exc)) from exc
        log.write(f"event receiver on {receiver.endpoint}", step="listener")
        return receiver

    def _feeds(self, events: EventReceiver, folder: RunFolder) -> dict[str, str]:
        """The variables that point a server's feeds (PROTOCOL.md §8) at this run: launched
        servers get them, and a user starting a server of their own is told them."""
        make_folders(folder.previews_dir)
        # Absolute: a launched server runs in its rollout folder, not in our working directory.
        previews = folder.previews_dir.absolute()
        feeds = {OTLP_ENDPOINT_ENV: events.endpoint, PREVIEW_ROOT_ENV: str(previews)}
        if self.plan.mode == "servers":
            settings = " ".join(f"{name}={value}" for name, value in feeds.items())
            self._notice(
                f"for phase times from the server and live transcripts, start it with {settings}"
            )
        return feeds

    async def _preflight(self, upstream: ChatUpstream) -> None:
        """One call to the run's model. Raises `PreflightError` when it cannot be used (the
        run stops before any rollout); a passing problem, such as a rate limit, is a notice."""
        self._stage(f"model: {self.plan.upstream.describe()}; preflight call", step="preflight")
        warning = await preflight(upstream)  # logged by preflight itself
        if warning is not None:
            self._tell(warning)

    async def _start_gateway(
        self, stack: StoppedTogether, upstream: ChatUpstream, forwarded: tuple[str, ...]
    ) -> ModelGateway:
        """The run's gateway in front of its model (`upstream`, its requests given the
        `forwarded` headers). Raises `GatewayError` when its port cannot be bound, an
        `InputError` naming --listener-port when that port was the user's."""
        request = self.plan.request
        log, calls = self._log, self._calls
        price = self.plan.price.per_token

        def call_ended(call: ModelCall) -> None:
            # calls.jsonl keeps the call even when the board's hook fails (the gateway logs it).
            try:
                self._board.call_ended(call)
            finally:
                calls.append(call)
            self._on_call_end()

        gateway = ModelGateway(
            upstream,
            listener_port=request.listener_port,
            advertise_url=request.advertise_url,
            redact=self._redact,
            on_call_start=self._board.call_started,
            on_call_end=call_ended,
            forward_headers=forwarded,
            price=None if price is None else price.cost,
            # Every rollout in flight may hold a call: as many as the process can keep in
            # flight, not the listeners' default, or a large run's calls would get 503s.
            http_limits=replace(
                HTTP_LIMITS,
                max_connections=self.descriptors.listener_connections(HTTP_LIMITS.max_connections),
            ),
        )
        self._mask([gateway.api_key])
        try:
            await stack.enter_async_context(gateway)
        except GatewayError as exc:
            if request.listener_port is None:
                raise
            raise InputError.single("--listener-port", str(exc)) from exc
        advertised = f", advertised as {request.advertise_url}" if request.advertise_url else ""
        log.write(f"model gateway on {gateway.base_url}{advertised}", step="listener")
        return gateway

    async def _servers(
        self,
        stack: StoppedTogether,
        folder: RunFolder,
        http: httpx.AsyncClient,
        feeds: dict[str, str],
    ) -> tuple[str, ...]:
        plan, request = self.plan, self.plan.request
        if plan.mode == "servers":
            directory = self.directory = ServerDirectory(request.servers, request.servers_file)
            return tuple(await directory.endpoints())
        log = self._log
        if plan.mode == "embedded":
            # A bearer of the run's own: the server listens on loopback, where any local
            # process could otherwise cancel the run's rollouts. Masked like every key.
            key = self.server_api_key = secrets.token_urlsafe(32)
            self._mask([key])
            self._stage("starting the demo rollout server", step="listener")
            url = await stack.enter_async_context(
                demo_rollout_server(
                    otlp_endpoint=feeds[OTLP_ENDPOINT_ENV],
                    preview_root=feeds[PREVIEW_ROOT_ENV],
                    api_key=key,
                )
            )
            log.write(f"demo rollout server on {url}", step="listener")
            return (url,)
        config = plan.config
        assert config is not None
        url = await stack.enter_async_context(
            launched_rollout_server(
                workspace=config.workspace,
                rollout=config.rollout,
                entrypoint=config.entrypoint,
                env=config.env,
                # Gathered (file, then environment) and checked when the plan was made.
                secret_values=plan.secrets,
                artifact_root=folder.trials_dir,
                log=self._launch_log,
                stage=lambda step, message: self._stage(message, step=step),
                notice=self._notice,
                http_client=http,
                api_key=request.server_api_key,
                port=request.rollout_port,
                feeds=feeds,
            )
        )
        return (url,)


__all__ = ["RunServices", "StartupStep"]
