"""Planning, running and answering: the agent and its parts."""

from structq.errors import RepairsExhausted

from .agent import Agent, Answer
from .engine import Engine, RunResult, StepResult
from .plan import Plan, Step

__all__ = ["Agent", "Answer", "Engine", "Plan", "RepairsExhausted", "RunResult", "Step", "StepResult"]
