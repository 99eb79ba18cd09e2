"""``structq init`` on a database that declares no foreign keys: references inferred by name
and type and verified on the data (``inferred: true``), and values proposed for small lookup
tables (a Chinook-shaped music store, written here as a real SQLite file)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from structq.capabilities import load_manifest
from structq.cli import app


@pytest.fixture
def music(tmp_path: Path) -> Path:
    db = tmp_path / "music.db"
    genres = ["Rock", "Jazz", "Metal", "Alternative & Punk", "Blues", "Latin", "Reggae", "Pop", "Soundtrack",
              "Bossa Nova", "Easy Listening", "Heavy Metal", "R&B/Soul", "Electronica/Dance", "World", "Hip Hop/Rap",
              "Science Fiction", "TV Shows", "Sci Fi & Fantasy", "Drama", "Comedy", "Alternative", "Classical",
              "Opera", "Country"]
    with sqlite3.connect(db) as c:
        c.executescript("""
            CREATE TABLE Genre (GenreId INTEGER PRIMARY KEY, Name TEXT);
            CREATE TABLE MediaType (MediaTypeId INTEGER PRIMARY KEY, Name TEXT);
            CREATE TABLE Track (TrackId INTEGER PRIMARY KEY, Name TEXT, GenreId INTEGER, MediaTypeId INTEGER,
                                Composer TEXT, Milliseconds INTEGER);
            CREATE TABLE customers (id INTEGER PRIMARY KEY, full_name TEXT, city TEXT, email TEXT,
                                    password_hash TEXT);
            CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, note_id INTEGER, amount REAL);
            CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
        """)
        c.executemany("INSERT INTO Genre VALUES (?, ?)", list(enumerate(genres, 1)))
        c.executemany("INSERT INTO MediaType VALUES (?, ?)", list(enumerate(
            ["MPEG audio file", "Protected AAC audio file", "Protected MPEG-4 video file", "Purchased AAC audio file",
             "AAC audio file"], 1)))
        c.executemany("INSERT INTO Track VALUES (?, ?, ?, ?, ?, ?)",
                      [(i, f"Song {i}", i % 25 + 1, i % 5 + 1, f"Composer {i % 7}", 1000 * i) for i in range(1, 81)])
        c.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?)",
                      [(i, f"Person {i}", "Paris", f"p{i}@example.com", "x" * 60) for i in range(1, 6)])
        # orders.note_id points at ids that notes does not have: named like a key, but not one
        c.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", [(i, i % 5 + 1, 100 + i, 9.5) for i in range(1, 11)])
        c.executemany("INSERT INTO notes VALUES (?, ?)", [(1, "x"), (2, "y")])
    return db


def _init(db: Path, folder: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MUSIC_URL", f"sqlite:///{db}")
    result = CliRunner().invoke(app, ["init", "--source", "music", "--url", f"sqlite:///{db}", "-m", str(folder)])
    assert result.exit_code == 0, result.output
    return load_manifest(folder / "music.yaml")[0], (folder / "music.yaml").read_text(encoding="utf-8")


def test_init_infers_references_the_database_does_not_declare(music: Path, tmp_path: Path, monkeypatch) -> None:
    manifest, text = _init(music, tmp_path / "caps", monkeypatch)
    track, orders = manifest.table("Track"), manifest.table("orders")
    assert (track.column("GenreId").references, track.column("GenreId").inferred) == ("Genre.GenreId", True)
    assert track.column("MediaTypeId").references == "MediaType.MediaTypeId"
    assert (orders.column("customer_id").references, orders.column("customer_id").inferred) == ("customers.id", True)
    assert orders.column("note_id").references is None  # 101… are no notes.id: the data refutes the name
    assert "inferred: true" in text


def test_sync_keeps_inferred_references_without_drift(music: Path, tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "caps"
    _init(music, folder, monkeypatch)
    result = CliRunner().invoke(app, ["sync", "--check", "-m", str(folder)])
    assert result.exit_code == 0, result.output


def test_init_proposes_values_for_small_lookup_tables(music: Path, tmp_path: Path, monkeypatch) -> None:
    manifest, _ = _init(music, tmp_path / "caps", monkeypatch)
    assert len(manifest.table("Genre").column("Name").values or {}) == 25
    assert set(manifest.table("MediaType").column("Name").values or {}) >= {"MPEG audio file", "AAC audio file"}
    assert manifest.table("Track").column("Name").values is None  # 80 songs: no lookup
    assert manifest.table("customers").column("full_name").values is None  # people, not a lookup


def test_init_writes_personal_columns_restricted_and_secrets_denied(music: Path, tmp_path: Path, monkeypatch) -> None:
    """The planner is told a personal column exists (so it can decline precisely), never a secret's name."""
    from structq.capabilities.render import render_manifest

    manifest, _ = _init(music, tmp_path / "caps", monkeypatch)
    customers = manifest.table("customers")
    assert customers.column("email").access == "restricted" and customers.column("email").denied
    assert customers.column("password_hash").access == "deny"
    text = render_manifest(manifest)
    assert "[restricted, exists but may not be read: email]" in text
    assert "password_hash" not in text and "example.com" not in text
