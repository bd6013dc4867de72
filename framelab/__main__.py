"""``python -m framelab``: the ``framelab`` console script (where it is not on PATH)."""

from framelab.cli import main

if __name__ == "__main__":
    main()
