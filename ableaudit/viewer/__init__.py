"""``ableaudit view``: a local web viewer over the published copy.

The report's pages, a search over the pairs (model, arm, metric, domain, disability,
outcome, text), two runs, revisions or models side by side on the same pairs, and rating an
answer blind to the model, landed as a human annotation (``ratings``). Served by the standard
library's HTTP server on 127.0.0.1 (``server.serve``), reading the copy ``sources.resolve``
finds. The package's own import stays light: the command line reads these constants.
"""

HOST = "127.0.0.1"
"""The only address the viewer listens on."""
DEFAULT_PORT = 8765
"""Its port unless --port says another."""
