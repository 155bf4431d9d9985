"""`python -m azjax` is the `azjax` command."""

from azjax.apps.cli import run

if __name__ == "__main__":
    run()
