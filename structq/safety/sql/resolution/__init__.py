"""Name resolution: which FROM item, and which of its columns, each name of a query reads.

The one invariant this package keeps, and every rule after ``check_columns`` relies on:

    After ``check_columns``, every column node of the tree is qualified with the FROM item it
    reads (``alias.column``), that FROM item is the one the database would read the name from,
    and the column is one the manifest allows; a name whose reading by the database cannot be
    made certain has been refused.

Column resolution itself is sqlglot's ``qualify_columns`` over a schema of the allowed columns
only (``schema.Derived.schema``), called by ``rules/columns.py``. What SQL leaves to each
database, or what sqlglot cannot know, is settled here before and after it:

- ``database_names.py``: an unqualified name that is also an output alias is read as the database
  reads it, per dialect and clause (the first wall);
- ``table_functions.py``: a table function in FROM gets its alias and the columns it returns,
  so qualification knows them;
- ``scopes.py``: after qualification, the manifest table each qualified column reads, decided
  scope by scope (aliases may repeat in nested scopes).
"""
