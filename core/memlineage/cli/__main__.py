"""``python -m memlineage.cli``: the ``memlineage`` command, run after the package has registered every command."""

from memlineage.cli import app

if __name__ == "__main__":  # pragma: no cover
    app()
