"""``python -m ableaudit.cli``: the ``ableaudit`` command, from any checkout."""

import sys

from ableaudit.cli.main import main

sys.exit(main())
