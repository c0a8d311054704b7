"""``python -m obda.cli``."""

from obda.cli import main

main()
