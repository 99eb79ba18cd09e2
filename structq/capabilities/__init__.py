"""Capability manifests: what each source holds and what may be read from it."""

from .catalog import CapabilitySet
from .loader import load_manifest, load_manifest_text, manifest_files
from .model import (
    Column,
    Example,
    ExampleStep,
    Index,
    Limits,
    Manifest,
    Policies,
    RowFilter,
    SearchField,
    SyncSettings,
    Table,
    dialect_from_url,
)
from .render import render_capabilities, render_manifest
from .references import LOCAL_SOURCE, Reference, find_references, local_inputs, replace_references

__all__ = [
    "CapabilitySet",
    "Column",
    "Example",
    "ExampleStep",
    "Index",
    "LOCAL_SOURCE",
    "Limits",
    "Manifest",
    "Policies",
    "Reference",
    "RowFilter",
    "SearchField",
    "SyncSettings",
    "Table",
    "dialect_from_url",
    "find_references",
    "local_inputs",
    "load_manifest",
    "load_manifest_text",
    "manifest_files",
    "render_capabilities",
    "render_manifest",
    "replace_references",
]
