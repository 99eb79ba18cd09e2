"""One table (``structq.errors.REPORTED_AS``) decides how an error reaches a caller, so the exit
code of ``structq`` and the HTTP status of ``structq serve`` always describe the same kind of
failure, and a new error class cannot be left out of either."""

from __future__ import annotations

import inspect

import pytest

from structq import errors
from structq.cli.common import exit_code_for
from structq.server.errors import error_status

#: Bases that are never raised themselves.
ABSTRACT = {errors.StructqError, errors._AtStep}
ERROR_CLASSES = [c for _, c in inspect.getmembers(errors, inspect.isclass)
                 if issubclass(c, errors.StructqError) and c not in ABSTRACT]


def _bare(cls: type[errors.StructqError]) -> errors.StructqError:
    return cls.__new__(cls)  # the class decides the row; no message is needed for that


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_class_has_its_own_row(cls: type[errors.StructqError]) -> None:
    assert any(row[0] is cls for row in errors.REPORTED_AS)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_the_cli_and_the_http_api_read_the_same_row(cls: type[errors.StructqError]) -> None:
    exit_code, status, code = errors.reported_as(_bare(cls))
    assert exit_code_for(_bare(cls)) == exit_code
    assert error_status(_bare(cls)) == (status, code)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_a_source_that_is_down_is_unavailable_on_both(cls: type[errors.StructqError]) -> None:
    exit_code, status, _ = errors.reported_as(_bare(cls))
    assert (exit_code == errors.EXIT_UNAVAILABLE) == issubclass(cls, errors.SourceUnavailable)
    if exit_code == errors.EXIT_UNAVAILABLE:
        assert status == 503


def test_a_subclass_row_comes_before_its_base_s() -> None:
    classes = [row[0] for row in errors.REPORTED_AS]
    for i, cls in enumerate(classes):
        assert not any(issubclass(cls, earlier) for earlier in classes[:i]), cls
