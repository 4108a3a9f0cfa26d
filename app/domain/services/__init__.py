"""One service module per resource: the queries and state transitions behind the JSON API
and the dashboard. A route validates its input, calls one service function and answers."""
