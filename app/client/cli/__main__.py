"""`python -m app.client.cli`: the `hinge` command."""

from app.client.cli import main

if __name__ == "__main__":  # importing the module (as tools that walk a package do) runs nothing
    main()
