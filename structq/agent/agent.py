"""The facade: ``Agent.ask`` plans, runs, repairs, answers and audits one question.

    question → verified example? → slotted example (template)? → plan cache? → model
             → run (sandbox + executors) ── retryable error ──→ repair (at most max_repairs)
             → empty? observe → revised plan (at most max_replans; see ``loop``)
             (adaptive: step by step, the model deciding after each; see ``adaptive``)
             → answer (model, or deterministic; a declining plan: its reason) → audit line

``ask``, ``aask``, ``run`` (a given plan) and ``Conversation.ask`` all go through one core,
``_respond``, which is the only place that writes the audit line. Within it, a plan is
obtained in ``_plan_and_run`` (plans that need no model come from ``_first_plan``) and the
results become an answer in ``_answer``: the two places to extend.

Only errors the model can fix go back to it (``PlanError``, ``SandboxViolation``, a query's
``ExecutionError``); an unavailable source or a timeout never does: the steps that need it
are left out with a note (a partial answer), or the question fails when nothing could be read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.config import Settings
from structq.errors import ConfigError, ModelError, PlanError, RepairsExhausted, StructqError

from .answer import Answer
from .audit import AuditLog
from .bridge import block_on
from .engine import Engine, PlanResult
from .llm import CallBounds, CallLog, model_name, resolve_model
from .plan import Plan
from .synthesis import Written, citations, render_deterministic

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.language_models import BaseChatModel

    from .figures import FigureCheck
    from .planner import Attempt, Planner

    from structq.capabilities import CapabilitySet
    from structq.linking import Budget, Selection

    from .cache import PlanCache, VerifiedPlans
    from .conversation import Conversation
    from .loop import Round
    from .templated import TemplatePlans

__all__ = ["Agent"]


@dataclass(frozen=True)
class Request:
    """One question as the core sees it: asked with these variables, on this day, after this
    conversation (``context``: the earlier turns as prompt text); ``answer``: whether the model
    writes the answer (and may see row contents)."""

    question: str
    vars: dict[str, Any]
    today: dt.date
    context: str = ""
    answer: bool = True
    use_cache: bool = True
    #: The last templated question with one slot's value changed, when this question is a
    #: follow-up that only changes it ("那北斗呢？", ``followup.py``).
    restated: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """The plan that ran, where it came from, its steps' results, and how it got there."""

    plan: Plan
    plan_source: str
    results: PlanResult
    attempts: "Sequence[Attempt]" = ()
    rounds: "Sequence[Round]" = ()


def _restated(question: str, conversation: "Conversation | None") -> tuple[str, ...]:
    if conversation is None or not conversation.turns:
        return ()
    from .followup import restated

    return tuple(restated(question, conversation.turns))


def _today(timezone: str | None) -> dt.date:
    """Today in the configured time zone (relative dates in questions resolve against it)."""
    if timezone and timezone != "local":
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"unknown time zone {timezone!r}",
                              hint="set STRUCTQ_TIMEZONE to an IANA name such as Asia/Shanghai, or to 'local'") from None
        return dt.datetime.now(zone).date()
    return dt.date.today()


class Agent:
    """Answers questions over the sources described by a capability set."""

    def __init__(
        self,
        capabilities: "CapabilitySet",
        *,
        llm: "BaseChatModel | str | None" = None,
        settings: Settings | None = None,
        cache: PlanCache | None = None,
        audit: AuditLog | None = None,
        adaptive: bool | None = None,
        engine: Engine | None = None,
    ) -> None:
        """``engine``: the one engine every data access goes through — the plans' runs, the
        template slots' look-ups, the keyword fallback, the replans (a service passes one that
        checks each caller's sources); by default a plain one over ``capabilities``."""
        self.capabilities = capabilities
        self.settings = settings or Settings.from_env()
        if adaptive is not None:
            self.settings = dataclasses.replace(self.settings, adaptive=adaptive)
        self._llm_spec = llm if llm is not None else self.settings.llm
        self._model: Any = None
        self._engine = engine if engine is not None else Engine(capabilities, threads=self.settings.threads)
        self.cache = cache if cache is not None else (self._default_cache() if self.settings.cache_enabled else None)
        self.audit = audit if audit is not None else (
            AuditLog(self.settings.audit_path, include_answer=self.settings.audit_answers)
            if self.settings.audit_enabled else None)

    @classmethod
    def from_path(cls, path: str | Path, *, llm: "BaseChatModel | str | None" = None, **kwargs: Any) -> "Agent":
        from structq.capabilities import CapabilitySet

        return cls(CapabilitySet.from_path(path), llm=llm, **kwargs)

    @staticmethod
    def _default_cache() -> PlanCache:
        from structq.config import user_cache_dir

        from .cache import PlanCache

        return PlanCache(user_cache_dir() / "plans.sqlite", best_effort=True)

    # Built on first use, not with the agent: a saved plan (``run``, ``structq run``) needs
    # neither, and indexing the slotted examples of a large catalogue takes a while.
    @functools.cached_property
    def verified(self) -> VerifiedPlans:
        """The verified example questions, whose plans run with no model call."""
        from .cache import VerifiedPlans

        return VerifiedPlans(self.capabilities)

    @functools.cached_property
    def templates(self) -> TemplatePlans:
        """The slotted examples: verified plans with other values in their slots."""
        from .templated import TemplatePlans

        return TemplatePlans(self.capabilities, self._engine)

    @property
    def engine(self) -> Engine:
        """The engine given at construction (not replaceable: every part of the agent holds it)."""
        return self._engine

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the model ----------------------------------------------------------------------

    @property
    def has_model(self) -> bool:
        """Whether a model is configured (without creating it)."""
        return self._model is not None or bool(self._llm_spec)

    @property
    def model(self) -> Any:
        """The chat model, created on first use; ``ConfigError`` when none is configured."""
        if self._model is None:
            self._model = resolve_model(self._llm_spec, self.settings)
        return self._model

    def planner(self) -> "Planner":
        from .planner import Planner  # a saved plan (``run``) is never planned

        return Planner(self.model, self.capabilities, timezone=self.settings.timezone or "local",
                       budget=self.link_budget(), bounds=CallBounds.of(self.settings),
                       examples=self.settings.plan_examples)

    def link_budget(self) -> "Budget":
        """The schema-linking budget from the settings (``STRUCTQ_PROMPT_TOKENS``, ``STRUCTQ_LINK_TOKENS``,
        ``STRUCTQ_ROUTE_TOKENS``)."""
        from structq.linking import Budget

        return Budget(prompt_tokens=self.settings.prompt_tokens, linked_tokens=self.settings.link_tokens,
                      route_tokens=self.settings.route_tokens)

    def link(self, question: str) -> "Selection":
        """The part of the catalogue the planner would be shown for ``question`` (no model call)."""
        from structq.linking import load_values, select

        return select(question, self.capabilities, budget=self.link_budget(), values=load_values(self.capabilities))

    # --- public API ---------------------------------------------------------------------

    def conversation(self) -> "Conversation":
        from .conversation import Conversation

        return Conversation(self)

    def plan(self, question: str, *, today: dt.date | None = None, use_cache: bool = True,
             conversation: "Conversation | None" = None, vars: dict[str, Any] | None = None) -> Plan:
        """A plan for ``question`` without running it (verified example, cache, or the model);
        ``vars``: the caller's variables, for the data a template's slots are looked up in."""
        today = today or _today(self.settings.timezone)
        context = conversation.context() if conversation else ""
        plan, _ = self._first_plan(question, today, use_cache, context, vars or {}, _restated(question, conversation))
        if plan is None:
            plan = self.planner().plan(question, today=today, log=CallLog(), context=context)
        return plan.validate_against(self.capabilities)

    def run(self, plan: Plan, *, vars: dict[str, Any] | None = None, question: str = "",
            answer: bool = False) -> Answer:
        """Run a given plan with no planning call, and audit it; the answer is deterministic unless ``answer``."""
        request = self._request(question, vars, None, None, answer=answer, use_cache=False)
        return block_on(lambda: self._respond(request, given=plan))

    def ask(self, question: str, *, vars: dict[str, Any] | None = None, today: dt.date | None = None,
            answer: bool = True, use_cache: bool = True, conversation: "Conversation | None" = None) -> Answer:
        """Plan, run (repairing on retryable errors), answer with citations, and audit."""
        return block_on(lambda: self.aask(question, vars=vars, today=today, answer=answer,
                                          use_cache=use_cache, conversation=conversation))

    async def aask(self, question: str, *, vars: dict[str, Any] | None = None, today: dt.date | None = None,
                   answer: bool = True, use_cache: bool = True, conversation: "Conversation | None" = None) -> Answer:
        """``ask`` for async callers. With a ``conversation``, its earlier turns go into the
        prompt and this question becomes its next turn."""
        request = self._request(question, vars, today, conversation, answer=answer, use_cache=use_cache)
        answered = await self._respond(request)
        if conversation is not None:
            conversation.record(answered)
        return answered

    # --- the one path -------------------------------------------------------------------

    def _request(self, question: str, vars: dict[str, Any] | None, today: dt.date | None,
                 conversation: "Conversation | None", *, answer: bool, use_cache: bool) -> "Request":
        return Request(question, dict(vars or {}), today or _today(self.settings.timezone),
                       conversation.context() if conversation else "", answer, use_cache,
                       _restated(question, conversation))

    async def _respond(self, request: "Request", *, given: Plan | None = None) -> Answer:
        """Every question and every given plan goes this way: a plan (``given``, or obtained by
        ``_plan_and_run``), its steps' results, the answer (``_answer``), and always one audit
        line, whether it succeeded or not."""
        log = CallLog()
        outcome: Outcome | None = None
        try:
            if given is not None:
                outcome = Outcome(given, "given", await self.engine.arun(given, vars=request.vars))
            else:
                try:
                    outcome = Outcome(*await self._plan_and_run(
                        request.question, request.vars, request.today, request.context, request.use_cache, log,
                        with_values=request.answer, restated=request.restated))
                except (ConfigError, ModelError) as failure:  # planning failed: a keyword search, if configured
                    from .fallback import keyword_fallback, wants_fallback

                    if not wants_fallback(self.settings.fallback, failure, has_model=self.has_model,
                                          verified=lambda: self.verified.get(request.question, request.today) is not None):
                        raise
                    plan, results, text, notes = await keyword_fallback(
                        request.question, self.capabilities, self.engine, vars=request.vars, today=request.today,
                        failure=failure)
                    outcome = Outcome(plan, "keywords", results)
            checks: "tuple[FigureCheck, ...]" = ()
            if outcome.plan_source != "keywords":
                written = await self.engine.call(self._answer, request.question, outcome.results, log, request.answer,
                                                 request.context)
                text, notes, checks = written.text, written.notes, written.checks
        except BaseException as exc:
            tried = len(exc.attempts) if isinstance(exc, RepairsExhausted) else 1
            self._audit(request, outcome, log, None, exc, tried, given=given)
            raise
        results, rounds = outcome.results, outcome.rounds
        answered = Answer(request.question, text, outcome.plan, results, citations(results),
                          [*(r.note() for r in rounds), *results.notes, *notes], outcome.plan_source, log, list(rounds),
                          list(checks))
        self._audit(request, outcome, log, text, None, len(outcome.attempts) + 1, checks=checks)
        return answered

    # --- internals ----------------------------------------------------------------------

    def _first_plan(self, question: str, today: dt.date, use_cache: bool, context: str, vars: dict[str, Any],
                    restated: Sequence[str] = ()) -> tuple[Plan | None, str | None]:
        """A plan that needs no model call: a verified example, a slotted one, then the cache.

        A verified or slotted example answers in a conversation too: it matches only a question
        whole in itself (every word of the example, every slot filled), so the earlier turns
        cannot change what it means — and without a model a conversation goes on. A follow-up
        that only changes the value of the last templated question ("那北斗呢？") is that
        question with the new value (``restated``)."""
        verified = self.verified.get(question, today)
        if verified is not None:
            return verified, "verified"
        for asked in (question, *restated):  # a follow-up that changes a slot's value: the slotted example again
            templated = self.templates.plan(asked, today, vars)
            if templated is not None:
                return templated, "template"
        if not self.has_model:  # nothing to plan with: say what can be asked instead
            raise self.templates.no_match(question)
        if use_cache and self.cache is not None and self.has_model:
            cached = self.cache.get(self._cache_key(question, today, context))
            if cached is not None:
                return cached, "cache"
        return None, None

    def _cache_key(self, question: str, today: dt.date, context: str) -> str:
        from .cache import PlanCache

        return PlanCache.key(question, fingerprint=self.capabilities.fingerprint(), model=model_name(self.model),
                             today=today.isoformat(), context=context)

    async def _plan_and_run(self, question: str, vars: dict[str, Any], today: dt.date, context: str,
                            use_cache: bool, log: CallLog, *, with_values: bool = True, restated: Sequence[str] = (),
                            ) -> tuple[Plan, str, PlanResult, list[Attempt], list[Round]]:
        plan, source = self._first_plan(question, today, use_cache, context, vars, restated)
        if plan is not None:
            # Verified and cached plans ran before; a failure now is the data's or the manifest's, not the model's.
            return plan, source or "verified", await self.engine.arun(plan, vars=vars), [], []
        from .planner import Attempt

        planner = self.planner()
        attempts: list[Attempt] = []
        rounds: list[Round] = []
        while True:
            plan = None
            try:
                plan = await self.engine.call(planner.plan, question, today=today, log=log, context=context, attempts=attempts)
                if self.settings.adaptive and not plan.declined:
                    from .adaptive import run_adaptive

                    plan, results, rounds = await run_adaptive(
                        planner, self.engine, question, plan, vars=vars, today=today, context=context, log=log,
                        max_replans=self.settings.max_replans, with_values=with_values)
                    break
                results = await self.engine.arun(plan, vars=vars)
            except StructqError as exc:
                if not exc.retryable:
                    raise
                attempts.append(Attempt(exc, plan, exc.raw if isinstance(exc, PlanError) else None))
                if len(attempts) > self.settings.max_repairs:
                    raise RepairsExhausted(attempts) from exc
                continue
            rounds = []
            if self.settings.max_replans and not plan.declined:
                from .loop import revise

                plan, results, rounds = await revise(
                    planner, self.engine, question, plan, results, vars=vars, today=today, context=context, log=log,
                    max_replans=self.settings.max_replans, with_values=with_values)
            break
        # A refusal is not worth keeping; nor is a plan an adaptive run revised or cut short on
        # what this run's data showed (replayed later, it would skip the model's judgment).
        adapted = self.settings.adaptive and bool(rounds)
        if use_cache and self.cache is not None and not plan.declined and not adapted:
            self.cache.put(self._cache_key(question, today, context), question, plan)
        return plan, "model", results, attempts, rounds

    def _answer(self, question: str, results: PlanResult, log: CallLog, use_model: bool,
                context: str = "") -> Written:
        """The answer text; the model that writes it sees the conversation's last turns (``context``)."""
        if results.plan.declined:  # ran nothing: the reason and what can be asked, no answer call
            from .decline import decline_text

            return Written(decline_text(question, results.plan, self.capabilities), [])
        if use_model and self.has_model:
            from .synthesis import synthesize

            return synthesize(self.model, question, results, log=log, bounds=CallBounds.of(self.settings),
                              capabilities=self.capabilities, context=context)
        return Written(render_deterministic(question, results, capabilities=self.capabilities), [])

    def _audit(self, request: "Request", outcome: "Outcome | None", log: CallLog, text: str | None,
               error: BaseException | None, plans_tried: int, *, given: Plan | None = None,
               checks: "Sequence[FigureCheck]" = ()) -> None:
        """One line: what was asked, the plan (a given plan even when it failed to run), the
        steps that ran, the model calls, the answer (when kept) or the error."""
        if self.audit is None:
            return
        rounds = outcome.rounds if outcome else ()
        plan = outcome.plan if outcome else given
        self.audit.record(question=request.question, vars=request.vars,
                          plan=plan.to_dict() if plan else None,
                          plan_source=outcome.plan_source if outcome else ("given" if given else None),
                          run=outcome.results if outcome else None, model_calls=log.to_list(), answer=text,
                          error=error, attempts=plans_tried,
                          rounds=[r.to_dict(with_values=self.audit.include_data) for r in rounds],
                          checks=[c.to_dict(with_values=self.audit.include_answer) for c in checks])
