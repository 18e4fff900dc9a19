"""Build the real-world corpus: ``python tests/corpus/build.py [--out DIR] [--force] [--results]``.

A thin entry point; the cache, its manifest and the options are ``corpus_cache``'s.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_cache import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
