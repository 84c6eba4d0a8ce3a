"""``python -m skill`` is the ``model-factory`` command."""

from skill.cli import main

main()
