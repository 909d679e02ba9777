"""Entry point of `python -m provisioner` (see provisioner/cli.py)."""

from provisioner.cli import main

main()
