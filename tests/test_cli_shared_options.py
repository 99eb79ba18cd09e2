"""Options several commands take are declared once (``cli.common.SHARED_OPTIONS``): every command
that takes one shows the same flags, help and default, and a parameter with no option is refused
when the command is defined, not when a user runs it."""

from __future__ import annotations

import inspect

import pytest
import typer

from structq.cli import app
from structq.cli.common import SHARED_OPTIONS, shared_options


#: Where a command means something else by the name: ``init``'s -m is the folder it writes into.
OWN = {("init", "manifests")}


def _commands() -> list[tuple[str, object]]:
    return [(info.name or info.callback.__name__, info.callback) for info in app.registered_commands]


@pytest.mark.parametrize("name", sorted(SHARED_OPTIONS))
def test_a_shared_option_is_the_same_in_every_command_that_takes_it(name: str) -> None:
    annotation, default = SHARED_OPTIONS[name]
    takers = []
    for command, callback in _commands():
        if (command, name) in OWN:
            continue
        param = inspect.signature(callback, eval_str=True).parameters.get(name)
        if param is not None:
            takers.append(command)
            assert (param.annotation, param.default) == (annotation, default), command
    assert takers, f"no command takes {name}"


def test_a_bare_parameter_that_is_not_a_shared_option_is_refused() -> None:
    def command(*, manifests, colour) -> None:  # type: ignore[no-untyped-def]
        """A command with a parameter no table entry explains."""

    with pytest.raises(TypeError, match="'colour'"):
        shared_options(command)


def test_a_command_keeps_its_own_option_order_and_its_own_options() -> None:
    def command(*, verbose, depth: int = 3, manifests) -> None:  # type: ignore[no-untyped-def]
        """Shared and own options mixed."""

    params = inspect.signature(shared_options(command)).parameters
    assert list(params) == ["verbose", "depth", "manifests"]
    assert params["depth"].default == 3
    assert params["verbose"].default is False
    app_ = typer.Typer()
    app_.command()(command)
