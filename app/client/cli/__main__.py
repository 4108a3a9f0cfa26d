"""`python -m app.client.cli`: the `hinge` command."""

from app.client.cli import main

main()
