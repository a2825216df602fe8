"""``python -m pykraft.cli ...``: how tests, benches and ``pykraft dev cluster`` start nodes and tools
without relying on the installed ``pykraft`` script being on PATH."""

import sys

from pykraft.cli import main

sys.exit(main())
