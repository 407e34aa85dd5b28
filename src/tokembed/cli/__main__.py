"""``python -m tokembed.cli`` runs the command line, as the ``tokembed`` script does."""

import sys

from tokembed.cli import main

sys.exit(main())
