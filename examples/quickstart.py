"""The quickstart as a script: `python examples/quickstart.py [--help]`, the same as `bert-keras quickstart`.

The workflow itself, top to bottom on the public API, is bert_keras/examples/quickstart.py:
it ships inside the installed package, so that the `bert-keras quickstart` command runs the
very same code. Read it there; this file only runs it.
"""

import sys

from bert_keras.examples.quickstart import main

if __name__ == "__main__":
    sys.exit(main())
