"""Verified examples that generalise: slots, matching that abstains, and "did you mean".

A verified example may declare slots (``capabilities.slots``); a question of the same shape
with other values — or a paraphrase of any verified example, its slots filled — is then
answered from the example's steps with its values bound as parameters, with no model call
(``TemplateSet.match``). When nothing matches and no model is
configured, ``closest_questions`` lists what can be asked. Pure: no I/O of its own (an entity
slot's value is looked up through the ``lookup`` the caller passes).
"""

from .fillers import Filled, Lookup
from .match import Match, TemplateMatch, TemplateSet
from .paraphrase import THRESHOLD, Paraphrase
from .pattern import Template
from .suggest import closest_questions
from .text import match_text, normalise_question

__all__ = ["THRESHOLD", "Filled", "Lookup", "Match", "Paraphrase", "Template", "TemplateMatch", "TemplateSet",
           "closest_questions", "match_text", "normalise_question"]
