"""A machine's own sitecustomize, shadowed by the bootstrap's: it must still run (chained).

Appends this process's pid to the file named by SHADOWED_MARK (test-only program).
"""

import os

_mark = os.environ.get("SHADOWED_MARK")
if _mark:
    with open(_mark, "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
