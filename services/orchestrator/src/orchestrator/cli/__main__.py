"""Runs the CLI: `python -m orchestrator.cli`."""

import sys

from orchestrator.cli.main import main

sys.exit(main())
