"""Which language a message is written in, for the `multilingual` text search configuration
(migration 0022): each message is stemmed in its own language, and a query word is read through
every stemmer (`stemmers`). Detection is offline (py3langid's bundled model; nothing is
downloaded) and restricted to the languages this PostgreSQL can stem."""

from .detect import SAMPLE_CHARS, Detector, detector, stemmers
from .snowball import SNOWBALL

__all__ = ["SAMPLE_CHARS", "Detector", "SNOWBALL", "detector", "stemmers"]
