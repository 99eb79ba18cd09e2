"""The garbage collector is paused while a catalogue loads and resumed after, whatever happens;
what the load kept is counted as old when it resumes."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from structq.capabilities import CapabilitySet
from structq.collector import collector_paused
from structq.errors import ManifestError


def test_nested_pauses_resume_once_the_outermost_ends() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_program_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_pauses_from_threads_that_overlap_resume_when_the_last_ends() -> None:
    inside = threading.Barrier(3)
    leave = [threading.Event(), threading.Event()]

    def pause(mine: threading.Event) -> None:
        with collector_paused():
            inside.wait()
            mine.wait()

    first, second = (threading.Thread(target=pause, args=(event,)) for event in leave)
    first.start()
    second.start()
    inside.wait()
    assert not gc.isenabled()
    leave[0].set()  # the first pause ends, whichever thread switched the collector off
    first.join()
    assert not gc.isenabled()  # the second still holds it
    leave[1].set()
    second.join()
    assert gc.isenabled()


def test_loading_a_catalogue_pauses_it_and_an_error_resumes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    from structq.capabilities import catalog

    real = catalog.load_manifest

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(catalog, "load_manifest", spy)
    (tmp_path / "a.yaml").write_text("source: a\nkind: sql\nurl: sqlite:///a.db\ntables: [{name: t, columns: [{name: id, type: integer}]}]\n")
    assert CapabilitySet.from_path(tmp_path).names == ["a"]
    assert seen == [False] and gc.isenabled()
    (tmp_path / "b.yaml").write_text("source: b\nkind: sql\nurl: sqlite:///b.db\ntables: [{name: t, columnz: []}]\n")
    with pytest.raises(ManifestError):
        CapabilitySet.from_path(tmp_path)
    assert gc.isenabled()


def test_what_a_pause_kept_is_old_when_the_collector_resumes() -> None:
    with collector_paused():
        kept = [[i] for i in range(5000)]  # containers the collector tracks
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(kept) in oldest and all(id(item) in oldest for item in kept)  # no young collection walks them
