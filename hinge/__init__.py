"""Hinge as a library for scikit-learn users (`pip install hinge[sklearn]`).

    from hinge.sklearn import HingeLinearSVC, HingeSVC

`hinge.sklearn` holds scikit-learn estimators on Hinge's solvers: they train in this
process (`solvers.fit`) or, given `server=` and `api_key=`, through a running Hinge
service (app.client). This package sits above both `solvers` and the client: the server
(app, workers) and the solvers never import it, and it imports nothing of the server but
the client (import-linter contracts in pyproject.toml).
"""
