"""Which SQL functions a query may call, per dialect: an allowlist, never a denylist.

sqlglot parses a known function into its own expression class (``exp.Count``,
``exp.DateTrunc``…) and anything else into ``exp.Anonymous`` carrying the name. So the
allowlist has two halves per dialect: expression classes and lower-case anonymous names.
A function in neither is refused, which is what keeps out everything with side effects or
I/O that nobody listed on purpose: file access (``pg_read_file``, ``lo_export``,
``LOAD_FILE``), sleeping (``pg_sleep``, ``SLEEP``, ``BENCHMARK``), locks (``GET_LOCK``,
``pg_advisory_lock``), sequences (``nextval``), settings (``set_config``,
``current_setting``), remote connections (``dblink``), extensions (``load_extension``),
allocation bombs (``randomblob``, ``zeroblob``).

System information is refused too (``version()``, ``current_user``, ``user()``,
``database()``, ``pg_backend_pid()``): it answers no business question and tells an attacker
what to aim at. ``now()``/``current_date``/``current_timestamp`` are allowed: analysts need
"today".

The lists were derived from the functions the legitimate corpora use
(``bench/function_inventory.py`` prints them) and widened to the families analysts write:
aggregates, window functions, string, date/time, math, conditional, JSON readers, casts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlglot import exp

__all__ = ["is_allowed", "is_table_function", "table_function", "function_name", "written_name", "ALIAS",
           "TABLE_FUNCTION_COLUMNS", "allowed_families", "TABLE_FUNCTIONS", "UNRESOLVED"]

#: Class names that this sqlglot version does not define (a test keeps this empty).
UNRESOLVED: list[str] = []


def _classes(names: str) -> frozenset[type[exp.Expr]]:
    found = set()
    for name in names.split():
        cls = getattr(exp, name, None)
        if cls is None:
            UNRESOLVED.append(name)
        else:
            found.add(cls)
    return frozenset(found)


def _names(names: str) -> frozenset[str]:
    return frozenset(names.lower().split())


#: Families, for the hint of a ``denied_function`` violation and for reading the lists.
_FAMILIES: dict[str, str] = {
    "aggregate": """Count Sum Avg Min Max GroupConcat ArrayAgg LogicalAnd LogicalOr Stddev
        StddevSamp StddevPop Variance VariancePop Median PercentileCont PercentileDisc Mode
        CovarPop CovarSamp Corr RegrSlope RegrIntercept BitwiseAndAgg BitwiseOrAgg
        BitwiseXorAgg ApproxDistinct CountIf""",
    "window": """RowNumber Rank DenseRank Ntile Lag Lead FirstValue LastValue NthValue
        CumeDist PercentRank""",
    "string": """Lower Upper Length Substring StrPosition Trim Replace Concat ConcatWs Left
        Right Pad Initcap Reverse Translate SplitPart SubstringIndex RegexpLike RegexpReplace
        RegexpExtract RegexpILike Chr Unicode Hex Format Repeat Ascii Levenshtein StartsWith
        EndsWith Contains NumberToStr ToChar""",
    "date/time": """CurrentDate CurrentTimestamp CurrentTime CurrentDatetime UtcTimestamp
        UtcDate Date Time Timestamp Datetime TimeToStr StrToDate StrToTime TsOrDsToDate
        TsOrDsToTimestamp TsOrDsAdd TsOrDsDiff UnixToTime TimeStrToTime TimeStrToDate
        TimeToUnix StrToUnix DateTrunc TimestampTrunc DatetimeTrunc TimeTrunc DateAdd DateSub
        DateDiff DatetimeAdd DatetimeSub DatetimeDiff TimestampAdd TimestampSub TimestampDiff
        Extract Year Quarter Month Week WeekOfYear Day DayOfMonth DayOfWeek DayOfWeekIso
        DayOfYear Hour Minute Second Dayname Monthname LastDay DateBin JustifyInterval
        JustifyDays JustifyHours MakeInterval DateFromParts DateStrToDate DiToDate
        YearOfWeek ToDays AddMonths MonthsBetween""",
    "math": """Abs Round Floor Ceil Trunc Sign Sqrt Cbrt Exp Ln Log Pow Mod Pi Greatest Least
        WidthBucket SafeDivide Div Rand Cos Sin Tan Acos Asin Atan Atan2 Degrees Radians""",
    "conditional": "Case If Coalesce Nullif Nvl2 Exists Any All",
    "JSON": """JSONExtract JSONExtractScalar JSONBExtract JSONBExtractScalar
        JSONBContains JSONFormat JSONArray JSONObject JSONType JSONValueArray ParseJSON""",
    "cast": "Cast TryCast ToNumber Typeof",
    "array": """ArraySize ArrayToString StringToArray Array ArrayContains ArrayContainsAll
        ArrayOverlaps Explode Unnest ExplodingGenerateSeries GenerateSeries""",
}
_FAMILY_CLASSES = {family: _classes(names) for family, names in _FAMILIES.items()}
_COMMON = frozenset().union(*_FAMILY_CLASSES.values())

#: Functions sqlglot leaves anonymous, per dialect (lower case).
_ANONYMOUS: dict[str, frozenset[str]] = {
    "sqlite": _names(
        """julianday strftime date time datetime unixepoch iif ifnull printf total
        json_extract json_array_length json_type json_valid json_quote likelihood likely
        unlikely instr substr ltrim rtrim char unicode glob like nullif ceiling power log2
        log10 mod trunc sign"""
    ),
    "postgres": _names(
        """age date_part date_trunc make_date make_timestamp make_interval to_timestamp
        to_date to_char to_number isfinite regexp_match regexp_matches regexp_split_to_array
        jsonb_extract_path_text json_extract_path_text jsonb_extract_path json_extract_path
        json_array_length jsonb_array_length jsonb_typeof json_typeof to_json to_jsonb
        jsonb_build_object json_build_object cardinality array_length array_position
        string_to_array btrim strpos char_length octet_length lpad rpad every ceiling power
        div mod trunc log10 scale"""
    ),
    "mysql": _names(
        """now weekday unix_timestamp from_unixtime adddate subdate curdate curtime
        date_format makedate period_diff period_add yearweek to_days from_days
        sec_to_time time_to_sec timediff json_unquote json_length json_keys json_contains
        json_extract json_search ifnull isnull field elt locate instr mid ltrim rtrim
        lcase ucase char_length space strcmp truncate ceiling power log10 log2 mod
        any_value std"""
    ),
}
#: Generic fallback for other sqlglot dialects: the common classes and a few anonymous names.
_GENERIC_ANONYMOUS = _names("ifnull nullif ceiling power mod log10 trunc")

#: Dialect-specific classes on top of the common families: what sqlglot parses some of the
#: names above into (MySQL's ``ELT`` is an ``exp.Elt``, ``a SOUNDS LIKE b`` becomes
#: ``SOUNDEX(a) = SOUNDEX(b)``; PostgreSQL's ``make_timestamp`` a ``TimestampFromParts``).
#: ``tests/test_function_allowlist.py`` parses every name of the lists in its dialect and
#: fails when one turns into a class that is not allowed, so a listed name cannot be refused.
_DIALECT_CLASSES: dict[str, frozenset[type[exp.Expr]]] = {
    "postgres": _classes("TimestampFromParts"),
    "mysql": _classes("AnyValue Elt JSONKeys Space Soundex"),
}

#: The columns a table function returns as written by ``ALIAS``: named after the function's
#: alias in FROM. PostgreSQL names the one column of a function returning a plain type so
#: (``generate_series(1, 3) AS g`` has the column ``g``).
ALIAS = ""
_JSON_EACH_SQLITE = ("key", "value", "type", "atom", "id", "parent", "fullkey", "path")
_KEY_VALUE = ("key", "value")

#: Functions allowed in FROM as a table source (they read no table), per dialect, by the name
#: a person writes, with the columns they return: the sandbox resolves a query's columns
#: against them (``sql/resolution/table_functions.py``) as against a declared table's.
TABLE_FUNCTION_COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {
    "sqlite": {"json_each": _JSON_EACH_SQLITE, "json_tree": _JSON_EACH_SQLITE},
    "postgres": {
        "generate_series": (ALIAS,),
        "unnest": (ALIAS,),
        **{f"{kind}_array_elements{text}": ("value",) for kind in ("json", "jsonb") for text in ("", "_text")},
        **{f"{kind}_each{text}": _KEY_VALUE for kind in ("json", "jsonb") for text in ("", "_text")},
    },
    "mysql": {},
}
TABLE_FUNCTIONS: dict[str, frozenset[str]] = {d: frozenset(f) for d, f in TABLE_FUNCTION_COLUMNS.items()}
#: The classes sqlglot parses some of those into, and the name they were written with:
#: PostgreSQL's ``generate_series`` in FROM becomes an ``ExplodingGenerateSeries``.
_TABLE_FUNCTION_CLASSES: dict[str, dict[type[exp.Expr], str]] = {
    "postgres": {cls: name for name, cls in (("generate_series", getattr(exp, "ExplodingGenerateSeries", None)),
                                            ("generate_series", getattr(exp, "GenerateSeries", None)),
                                            ("unnest", getattr(exp, "Unnest", None))) if cls is not None},
}


def function_name(node: exp.Func) -> str:
    """The name a person would write: ``pg_sleep`` for anonymous calls, ``COUNT`` otherwise."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql_name().lower()


_WORD = re.compile(r"[\w$]+")


def written_name(node: exp.Func, text: str) -> str:
    """The name as the query wrote it (``CONVERT_TZ``), for messages: sqlglot may know the
    function under another (``CONVERT_TIMEZONE``). ``text`` is the text sqlglot parsed, which
    the node's position indexes; a node without a position (built by sqlglot from an operator,
    like the ``SOUNDEX`` of MySQL's ``SOUNDS LIKE``) falls back to ``function_name``."""
    start, end = node.meta.get("start"), node.meta.get("end")
    if isinstance(start, int) and isinstance(end, int):
        name = text[start : end + 1]
        if _WORD.fullmatch(name):
            return name
    return function_name(node)


def table_function(node: exp.Func, dialect: str) -> str | None:
    """The name of the dialect's table function ``node`` is (written in FROM), or None."""
    name = _TABLE_FUNCTION_CLASSES.get(dialect, {}).get(type(node))
    if name is None and isinstance(node, exp.Anonymous):
        name = function_name(node)
    return name if name in TABLE_FUNCTIONS.get(dialect, ()) else None


def is_table_function(node: exp.Func, dialect: str) -> bool:
    """Whether ``node``, written in FROM, is one of the dialect's table functions."""
    return table_function(node, dialect) is not None


def is_allowed(node: exp.Func, dialect: str, extra: Iterable[str]) -> bool:
    """Whether ``node`` is on the dialect's allowlist or named in the manifest's ``functions``.

    Operators that sqlglot models as functions (``AND``, ``->>``, ``||``) are binary nodes
    and are always allowed: they compute on values and reach nothing outside the query.
    """
    if isinstance(node, (exp.Binary, exp.Connector)):
        return True
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        return name in _ANONYMOUS.get(dialect, _GENERIC_ANONYMOUS) or name in {e.lower() for e in extra}
    cls = type(node)
    if cls in _COMMON or cls in _DIALECT_CLASSES.get(dialect, ()):
        return True
    return bool(extra) and function_name(node) in {e.lower() for e in extra}


def allowed_families(dialect: str) -> str:
    """A short, readable summary of what is allowed, for hints."""
    examples = {
        "aggregate": "COUNT, SUM, AVG, MIN, MAX",
        "window": "ROW_NUMBER, RANK, LAG, LEAD",
        "string": "LOWER, UPPER, SUBSTRING, REPLACE, CONCAT",
        "date/time": {
            "sqlite": "date, datetime, strftime, julianday",
            "postgres": "date_trunc, extract, to_char, age, now()",
            "mysql": "DATE_FORMAT, DATEDIFF, TIMESTAMPDIFF, YEAR, QUARTER",
        }.get(dialect, "EXTRACT, CURRENT_DATE"),
        "math": "ABS, ROUND, FLOOR, CEIL",
        "conditional": "CASE, COALESCE, NULLIF" + {"sqlite": ", IIF", "mysql": ", IF"}.get(dialect, ""),
        "JSON": "JSON readers",
        "cast": "CAST",
    }
    return "; ".join(f"{family}: {names}" for family, names in examples.items())
