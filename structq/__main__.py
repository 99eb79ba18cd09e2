"""``python -m structq`` runs the command line."""

from structq.cli import main

main()
