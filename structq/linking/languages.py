"""Which language a question is written in, and which languages can reach each source.

Lexical linking matches words. A question in Chinese shares no word with tables named in
English, and an English question shares few with tables named in German — linking then picks
whatever English-named tables happen to share its words, confidently and wrongly. So before
trusting a ranking, linking asks whether the question's language can reach the catalogue at
all: a source is *reachable* from a language when its names are written in it, or its
descriptions or synonyms are (``structq describe --languages zh,en`` writes such synonyms),
or the bundled lexicon bridges the two (Chinese ↔ English business words, ``lexicon.py``).

The guesses are deliberately simple and explainable: Chinese is any CJK ideograph; German is
told from English by umlauts/ß, German function words (in prose) and a list of common German
words of schemas (in names, where function words are rare); everything else written in Latin
letters is ``latin``: a language not recognised (English, abbreviations, pinyin), reachable
from any question in Latin letters — linking flags only what it recognises as out of reach. A wrong guess costs a routing call, never a wrong answer: the sandbox
still checks every query against the full manifests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .tokens import is_cjk, latin_words

if TYPE_CHECKING:
    from structq.capabilities import Manifest

__all__ = ["Reach", "question_language", "text_language", "source_reach", "LANGUAGE_NAMES"]

LANGUAGE_NAMES = {"zh": "Chinese", "en": "English", "de": "German", "latin": "Latin letters"}

_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_UMLAUT = re.compile(r"[äöüß]")

#: Function words of English and of German prose: which of the two a question or a description is in.
_ENGLISH_PROSE = frozenset(
    "the of in on at to for from by with and or is are was were what which who how many much "
    "each every this that these those their than all list show give find".split())
_GERMAN_PROSE = frozenset(
    "der die das den dem des ein eine einer und oder nicht ist sind wie viele welche welcher wer wo "
    "gibt es zu von mit für auf im bei aus nach über alle jede jeder sie ihre haben hat werden "
    "zeige nenne liste".split())

#: Common German words of table and column names (umlauts transliterated too), for names
#: without function words. A source counts as German-named when enough of its name words are
#: marked (``_GERMAN_SHARE``).
_GERMAN_NAME_WORDS = frozenset("""
    abteilung adresse adressen alter anzahl art arten auftrag auftraege aufträge ausgabe autor
    bearbeiter beginn behandlung beschreibung besitzer bestand bestellung bestellungen betrag
    bezeichnung bezirk bild buch buchung bundesland datum dauer dienst dokument dokumente ende
    einheit eintrag einwohner eltern fach fahrzeug fahrer farbe firma flug fluege flughafen
    frau gebaeude gebühr gebuehr geburtsdatum geburtsjahr gehalt geld geschlecht gesellschaft
    gewicht gewinn groesse grösse größe gruppe gueltig hersteller hauptfach haus heimatort hoehe
    jahr jahre kapazitaet kategorie kind kinder klasse konto kosten kunde kunden kurs kurse land
    laender lehrer leiter leistung lieferant lieferung liste mannschaft menge merkmal
    mitarbeiter mitglied modell monat nachname name_der nummer oberschueler ort orte person
    personen postleitzahl preis produkt produkte projekt rang rasse rechnung rechnungen schiff
    schlacht schueler schule sprache staat stadt stadion stelle steuer stimme strasse stunde
    summe tag teilnehmer titel typ umsatz unternehmen veranstaltung verkauf verkaeufer vertrag
    verein vorlage vorname wert woche zahl zahlung zeile zeit ziel zimmer ergebnis tod kampf
    verloren befehl
""".split())
_GERMAN_SUFFIXES = ("ung", "ungen", "keit", "heit", "schaft", "nummer", "datum", "anzahl")
_GERMAN_SHARE = 0.25


def _german_word(word: str) -> bool:
    return (_UMLAUT.search(word) is not None or word in _GERMAN_NAME_WORDS
            or (len(word) > 6 and word.endswith(_GERMAN_SUFFIXES)))


def question_language(text: str) -> str:
    """``zh``, ``de`` or ``en``: Chinese when it has at least as many ideographs as Latin words
    (Latin names and values inside a Chinese question do not make it English); German by its
    function words."""
    words = [w.lower() for w in latin_words(text) if w.isalpha()]
    ideographs = len(_CJK_CHAR.findall(text))
    if ideographs and ideographs >= len(words):
        return "zh"
    german = sum(w in _GERMAN_PROSE or _UMLAUT.search(w) is not None for w in words)
    english = sum(w in _ENGLISH_PROSE for w in words)
    return "de" if german > english else "en"


def text_language(text: str) -> str | None:
    """The language of prose (a description); None when there is none."""
    return question_language(text) if text.strip() else None


def names_language(names: list[str]) -> str:
    """The language identifiers are written in: ``zh``, ``de`` or ``latin`` (not recognised)."""
    if any(is_cjk(n) for n in names):
        return "zh"
    words = [w for n in names for w in latin_words(n) if len(w) > 2 and w.isalpha()]
    marked = sum(_german_word(w) for w in words)
    return "de" if words and marked >= 2 and marked / len(words) >= _GERMAN_SHARE else "latin"


def _synonym_language(synonym: str) -> str:
    """A synonym is a word or two: Chinese, German when a word of it is marked, else English."""
    if is_cjk(synonym):
        return "zh"
    return "de" if any(_german_word(w) for w in latin_words(synonym)) else "en"


@dataclass(frozen=True)
class Reach:
    """A source's languages: the one its names are in, and those its descriptions/synonyms add."""

    source: str
    names: str
    described: frozenset[str]
    tables: int

    def reachable_from(self, language: str) -> bool:
        if language == self.names or language in self.described:
            return True
        return self.names == "latin" and language != "zh"


def source_reach(m: "Manifest") -> Reach:
    """What one manifest's names and prose are written in (kept in its linking ``parts.Part``)."""
    names: list[str] = []
    prose: list[str] = [m.description or ""]
    synonyms: list[str] = []
    for obj in m.objects:
        names.append(obj.name)
        prose.append(obj.description or "")
        synonyms += list(obj.synonyms)
        for member in getattr(obj, "allowed_columns", None) or getattr(obj, "fields", []) or []:
            names.append(member.name)
            prose.append(member.description or "")
            synonyms += list(member.synonyms)
    described = {text_language(p) for p in prose if p}
    described |= {_synonym_language(s) for s in synonyms if s}
    described.discard(None)
    return Reach(m.source, names_language(names), frozenset(x for x in described if x), len(m.objects))
