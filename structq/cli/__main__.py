"""``python -m structq.cli`` runs the command line."""

from structq.cli import main

main()
