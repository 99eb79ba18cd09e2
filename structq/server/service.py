"""The service behind every transport (HTTP API, web page, MCP): one warm ``Agent``.

One agent lives as long as the process: its executors keep their connection pools, the
embedded search server stays loaded, the plan cache stays open. Every operation takes the
caller's ``Principal``: its fixed variables are the only variables a query ever sees, and its
sources bound what any plan may touch (``observe.GuardedEngine`` enforces that on every run).

Conversations and the plan cache live in the shared store (``store.py``), not in the process:
workers are stateless, so requests of one conversation may land on any worker or host.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from structq.errors import StructqError

from .errors import RequestRejected
from .inputs import check_steps, check_text, check_values
from .logs import current_request
from .metrics import Metrics
from .observe import Emit, GuardedEngine, check_access, request_scope
from .traces import QuestionSpan, Traces

if TYPE_CHECKING:
    from structq.agent import Agent, Answer
    from structq.agent.llm import ModelCall
    from structq.agent.conversation import Conversation, Turn
    from structq.capabilities import CapabilitySet

    from .config import Principal, ServerConfig
    from .public import Surface
    from .store import Store

__all__ = ["Service", "Event"]

T = TypeVar("T")


@dataclass(frozen=True)
class Event:
    """One server-sent event of a streamed answer."""

    name: str
    data: dict[str, Any]
    #: For an ``error`` event, the HTTP status the error has (a stream that fails before its
    #: first event is answered with it, as a plain JSON error).
    status: int | None = None


#: How often, at most, a worker forgets the conversations past their retention.
PRUNE_EVERY_S = 3600.0


class Conversations:
    """Conversations by id in the shared store, each owned by the caller that started it
    (another caller's id is simply unknown), so any worker can continue any conversation.

    A conversation exists only when a caller asks for one (``start``) or continues one: a
    one-off question leaves nothing in the store. Those nobody continued for ``keep_days``
    are forgotten (at start, then at most every ``PRUNE_EVERY_S`` as new ones begin)."""

    def __init__(self, store: "Store", keep_days: float = 30) -> None:
        self.store = store
        self.keep_s = keep_days * 24 * 3600
        self._pruned = 0.0
        self.prune()

    def prune(self) -> None:
        self._pruned = time.monotonic()
        self.store.prune_conversations(self.keep_s)

    def open(self, agent: "Agent", owner: str, cid: str | None,
             start: bool = False) -> tuple[str | None, "Conversation | None"]:
        """(id, history) of conversation ``cid``; a new one when ``start``; (None, None) for a
        question asked on its own."""
        from structq.agent.conversation import Conversation, Turn

        if cid is None:
            if not start:
                return None, None
            if time.monotonic() - self._pruned > PRUNE_EVERY_S:
                self.prune()
            return uuid.uuid4().hex, agent.conversation()
        check_text(cid, "the conversation id")
        keep = agent.conversation().max_turns
        found = self.store.load_conversation(cid, last=keep)
        if found is None or found[0] != owner:
            raise _unknown(cid)
        return cid, Conversation(agent, [Turn(**turn) for turn in found[1]])

    def append(self, cid: str, owner: str, conversation: "Conversation", turn: "Turn") -> None:
        """Store ``turn`` (which the agent already added to ``conversation``) after the stored
        ones (only the turns the next prompt can show are kept: a long conversation stays small). Appended, not written back: follow-ups answered
        at once are all kept, in the order they finished."""
        if not self.store.append_turn(cid, owner, turn, keep=conversation.max_turns):
            raise _unknown(cid)


def answer_record(answer: "Answer", principal: "Principal", today: dt.date) -> dict[str, Any]:
    """What feedback on an answer needs: who asked what on which day, the plan and where it
    came from, and how many rows each step returned (never the rows)."""
    return {"question": answer.question, "user": principal.user, "vars": principal.vars, "today": today.isoformat(),
            "plan": answer.plan.to_dict(), "plan_source": answer.plan_source,
            "row_counts": {key: step.row_count for key, step in answer.results.steps.items()}}


def _unknown(cid: str) -> RequestRejected:
    """Another caller's conversation id is answered like one that does not exist."""
    return RequestRejected(404, "unknown_conversation", f"no conversation {cid!r} for this caller",
                           hint="start a new conversation: leave 'conversation' out")


class Service:
    """Ask, plan, run and describe, for one principal at a time, on a shared agent."""

    def __init__(self, agent: "Agent", config: "ServerConfig", store: "Store | None" = None,
                 traces: "Traces | None" = None) -> None:
        """``store``: where conversations live (``make_service`` passes the configured one; by
        default an in-memory store, for one process embedding the service). ``traces``: where
        spans go (by default what the ``OTEL_*`` variables ask for, usually nothing)."""
        import structq.safety  # noqa: F401  (before the warm-up thread and the first request both import it: two first imports at once can deadlock)

        from .store import Store

        if not isinstance(agent.engine, GuardedEngine):
            raise TypeError("the service's agent must be built with engine=GuardedEngine(...) "
                            "(Service.agent_for makes one): every data access checks the caller")
        self.agent = agent
        self.config = config
        self.store = store if store is not None else Store("sqlite://")
        self.conversations = Conversations(self.store, config.conversation_days)
        self.metrics = Metrics(agent.capabilities, agent.engine)
        agent.engine.metrics = self.metrics
        self.traces = traces if traces is not None else Traces.from_env()
        agent.engine.traces = self.traces
        self.started = time.time()

    @staticmethod
    def agent_for(capabilities: "CapabilitySet", **kwargs: Any) -> "Agent":
        """An agent whose one engine checks each caller: every plan, template look-up,
        keyword fallback and replan runs with the caller's variables on its sources only."""
        from structq.agent import Agent
        from structq.config import Settings

        settings = kwargs.pop("settings", None) or Settings.from_env()
        engine = GuardedEngine(capabilities, threads=settings.threads)
        return Agent(capabilities, settings=settings, engine=engine, **kwargs)

    def close(self) -> None:
        self.agent.close()
        self.store.close()
        if self.traces is not None:
            self.traces.close()

    @contextmanager
    def _serving(self, principal: "Principal", emit: Emit | None = None) -> Iterator[None]:
        """Work done for ``principal``: the engine's scope (its sources and variables, the
        stream's events), its audit lines (user, request id) and the model calls' metrics
        (and spans)."""
        from structq.agent.audit import audited_as
        from structq.agent.llm import observing_model_calls

        info = current_request()
        if info is not None:
            info.user = principal.user
        with request_scope(principal, emit), observing_model_calls(self._model_call), \
                audited_as(user=principal.user, request_id=info.request_id if info is not None else None):
            yield

    def _model_call(self, call: "ModelCall", outcome: str) -> None:
        self.metrics.model_call(call, outcome)
        if self.traces is not None:
            self.traces.model_call(call, outcome)

    @contextmanager
    def _question(self, principal: "Principal") -> Iterator[QuestionSpan]:
        """The trace span of one question (a no-op without traces)."""
        if self.traces is None:
            yield QuestionSpan()
            return
        with self.traces.question(principal.user) as span:
            yield span

    def _in_conversation(self, cid: str | None) -> None:
        info = current_request()
        if info is not None:
            info.conversation = cid

    # --- questions -----------------------------------------------------------------------

    def check_question(self, question: str) -> None:
        check_text(question, "the question")
        limit = self.config.limits.max_question_chars
        if len(question) > limit:
            raise RequestRejected(400, "question_too_long", f"the question has {len(question)} characters; "
                                  f"at most {limit} are accepted", hint="ask a shorter question")
        if not question.strip():
            raise RequestRejected(400, "empty_question", "the question is empty", hint="send a question")

    async def ask(self, principal: "Principal", question: str, *, conversation: str | None = None,
                  start_conversation: bool = False, today: dt.date | None = None,
                  no_answer: bool = False) -> dict[str, Any]:
        """The document of ``structq ask --json``, plus the conversation id (None unless the
        question continues one or ``start_conversation``)."""
        self.check_question(question)
        cid, conv = self.conversations.open(self.agent, principal.key, conversation, start_conversation)
        self._in_conversation(cid)
        with self._question(principal) as span, self._serving(principal):
            answer = await self.within_budget(self.agent.aask(question, vars=principal.vars, today=today,
                                                              answer=not no_answer, conversation=conv))
            span.answered(answer)
        return self._remember(principal, cid, conv, answer, today)

    async def within_budget(self, work: Awaitable[T]) -> T:
        """``work``, or 504 ``request_timeout`` once it has run ``limits.request_timeout_s``."""
        budget = self.config.limits.request_timeout_s
        try:
            return await asyncio.wait_for(work, timeout=budget)
        except asyncio.TimeoutError:
            raise RequestRejected(504, "request_timeout", f"the request took longer than {budget:g} s",
                                  hint="ask something narrower, or raise limits.request_timeout_s in server.yaml") from None

    async def ask_stream(self, principal: "Principal", question: str, *, conversation: str | None = None,
                         start_conversation: bool = False, today: dt.date | None = None,
                         no_answer: bool = False, surface: "Surface" = "api") -> AsyncIterator[Event]:
        """``plan`` (again after a repair), ``step`` per settled step (run, skipped or failed),
        ``answer`` pieces ``{delta}`` while the model writes (each checked before it is sent),
        one ``answer`` ``{text, citations, replaces_stream}`` with the final text, then ``done``
        with the whole document — or ``error`` with the error body, as the last event.

        ``replaces_stream`` is true when the final text is not what the pieces spelt (the
        answer check rejected the model's reply): a client shows the final text instead."""
        from structq.agent.synthesis import streaming_answer

        from .errors import error_body, error_status

        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        streamed: list[str] = []

        def emit(name: str, data: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, Event(name, data))

        def write(text: str) -> None:
            streamed.append(text)
            emit("answer", {"delta": text})

        async def work() -> dict[str, Any]:
            self.check_question(question)
            cid, conv = self.conversations.open(self.agent, principal.key, conversation, start_conversation)
            self._in_conversation(cid)
            with self._question(principal) as span, self._serving(principal, emit), streaming_answer(write):
                answer = await self.within_budget(self.agent.aask(question, vars=principal.vars, today=today,
                                                                  answer=not no_answer, conversation=conv))
                span.answered(answer)
            return self._remember(principal, cid, conv, answer, today)

        task = asyncio.ensure_future(work())
        task.add_done_callback(lambda _: loop.call_soon(queue.put_nowait, None))
        while (event := await queue.get()) is not None:
            yield event
        try:
            document = task.result()
        except Exception as exc:  # every failure ends the stream as an error event
            yield Event("error", error_body(exc, surface, open_server=self.config.open), status=error_status(exc)[0])
            return
        replaced = bool(streamed) and "".join(streamed).strip() != document["answer"]
        yield Event("answer", {"text": document["answer"], "citations": document["citations"],
                               "replaces_stream": replaced})
        yield Event("done", document)

    def _remember(self, principal: "Principal", cid: str | None, conv: "Conversation | None",
                  answer: "Answer", today: dt.date | None) -> dict[str, Any]:
        """The answer document, with its conversation and its ``answer_id`` (what was asked and
        planned is kept under it, for feedback on the answer)."""
        self.metrics.plan(answer.plan_source)
        if cid is not None and conv is not None:
            self.conversations.append(cid, principal.key, conv, conv.turns[-1])  # the agent recorded the turn
        answer_id = uuid.uuid4().hex
        self.store.put_answer(answer_id, principal.key, answer_record(answer, principal, today or dt.date.today()))
        return {**answer.to_dict(), "conversation": cid, "answer_id": answer_id}

    async def feedback(self, principal: "Principal", answer_id: str, rating: str, comment: str | None) -> dict[str, Any]:
        """Keep ``principal``'s rating of one of its own answers (a second rating replaces the first)."""
        record = await asyncio.to_thread(self.store.get_answer, answer_id, principal.key)
        if record is None:
            raise RequestRejected(404, "unknown_answer", f"no answer {answer_id!r} for this caller",
                                  hint="send the answer_id of an answer this token received")
        await asyncio.to_thread(self.store.put_feedback, answer_id, principal.key, rating, comment, record)
        return {"answer_id": answer_id, "rating": rating}

    async def plan(self, principal: "Principal", question: str, *, conversation: str | None = None,
                   today: dt.date | None = None) -> dict[str, Any]:
        self.check_question(question)
        conv = self.conversations.open(self.agent, principal.key, conversation)[1] if conversation else None
        with self._serving(principal):  # a template's look-ups run as this caller
            plan = await self.within_budget(asyncio.to_thread(self.agent.plan, question, today=today, conversation=conv,
                                                              vars=principal.vars))
        check_steps(plan.to_dict(), self.config.limits.max_steps)
        check_access(principal, plan)
        return plan.to_dict()

    async def run(self, principal: "Principal", plan_data: dict[str, Any], *, question: str = "") -> dict[str, Any]:
        """A given plan, no model: the document of ``structq run --json``. Its size, text and
        numbers are checked first (``inputs.py``: MCP's ``run_plan`` comes this way too); reading
        it and running it happen off the event loop, within the request's budget."""
        from structq.agent import Plan

        check_steps(plan_data, self.config.limits.max_steps)
        check_text(question, "the question")

        def parse_and_run() -> dict[str, Any]:
            check_values(plan_data, "the plan")
            plan = Plan.parse(plan_data)
            return self.agent.engine.run(plan, vars=principal.vars).to_dict()

        with self._serving(principal):
            return await self.within_budget(asyncio.to_thread(parse_and_run))

    # --- the map -------------------------------------------------------------------------

    def sources(self, principal: "Principal") -> list[dict[str, Any]]:
        """What the manifests declare to this caller, denied columns and fields left out."""
        from .describe import describe_manifest

        return [describe_manifest(m) for m in self.agent.capabilities if principal.may_use(m.source)]

    def describe(self, principal: "Principal", source: str) -> str:
        """One source as the planner sees it (the prompt text)."""
        from structq.capabilities.render import render_manifest

        from .errors import AccessDenied

        manifest = self.agent.capabilities.get(source)
        if manifest is None:
            raise RequestRejected(404, "unknown_source", f"no source {source!r}",
                                  hint=f"sources: {', '.join(m['source'] for m in self.sources(principal))}")
        if not principal.may_use(source):
            raise AccessDenied(source, principal.user)
        return render_manifest(manifest)

    def examples(self, principal: "Principal") -> list[dict[str, Any]]:
        """Verified example questions whose plans this caller may run."""
        from structq.agent import Plan

        out = []
        for _manifest, example in self.agent.capabilities.examples():
            plan = Plan.from_example(example)  # type: ignore[arg-type]
            sources = sorted({s.source for s in plan.steps} - {"local"})
            if all(principal.may_use(s) for s in sources):
                out.append({"question": example.question, "sources": sources,  # type: ignore[attr-defined]
                            "from_feedback": example.feedback is not None, "draft": example.draft})  # type: ignore[attr-defined]
        return out

    # --- health --------------------------------------------------------------------------

    def warm(self) -> None:
        """Open every source now (pools, the embedded search server's index load), not on the first question."""
        self.readiness()

    def readiness(self, *, details: bool = True) -> dict[str, str]:
        """Each source: ``ok`` or why it cannot be reached (``unavailable`` without
        ``details``: an anonymous caller learns nothing about the infrastructure). The reason
        always goes to the log; what a caller sees of it has no URL, path or address. Never raises."""
        import logging

        from .describe import probe
        from .public import scrub

        states = {}
        for manifest in self.agent.capabilities:
            try:
                probe(self.agent.engine.executors.get(manifest), manifest)
                states[manifest.source] = "ok"
                continue
            except StructqError as exc:
                reason = str(exc)
            except Exception as exc:  # a probe must never take the process down
                reason = f"{type(exc).__name__}: {exc}"
            logging.getLogger("structq.server").warning("source %s is not ready: %s", manifest.source, reason)
            states[manifest.source] = (scrub(reason) or "unavailable") if details else "unavailable"
        return states
